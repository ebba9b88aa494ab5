"""The evidence format's executable check (issue 42; docs/evidence-format.md §7).

Two verifiers read every vector in ``tests/fixtures/evidence/``: ``sessionwire audit
verify FILE`` and ``tests/evidence_verifier.py``, written from the specification alone
(it imports nothing from sessionwire). Each must give every vector the verdict and the
finding kinds its manifest states (written by hand from the specification, in
``make_vectors.py``), and they must agree on bundles and exports this suite signs on the
memory, SQLite and PostgreSQL stores, genuine and forged. The worked hash examples are
reproduced by both from their fields.
"""

from __future__ import annotations

import ast
import base64
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import UUID

import evidence_verifier as spec
import pytest
from audit_rig import audit_log_of, open_populated, run_cli, sealed_now, signed_records
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionwire.application.audit.checkpoint import (
    make_checkpoint,
    public_key_text,
    raw_public_key,
)
from sessionwire.domain import merkle
from sessionwire.domain.checkpoint import (
    OrderedEvent,
    SessionMembers,
    Statement,
    StreamHead,
    order_digest,
)
from sessionwire.domain.hash_chain import RecordContent, log_hash, stream_hash
from sessionwire.domain.session import session_uuid
from sessionwire.testing import VirtualClock

VECTORS = Path(__file__).resolve().parents[1] / "fixtures" / "evidence"
MANIFEST = json.loads((VECTORS / "manifest.json").read_text())["vectors"]
EXAMPLES = json.loads((VECTORS / "hashes.json").read_text())["examples"]


def _forgeries() -> ModuleType:
    """The forging functions of make_vectors.py (a script, not a package)."""
    path = VECTORS / "make_vectors.py"
    found = importlib.util.spec_from_file_location("make_vectors", path)
    assert found is not None
    assert found.loader is not None
    module = importlib.util.module_from_spec(found)
    sys.modules.setdefault("make_vectors", module)
    found.loader.exec_module(module)
    return module


forge = _forgeries()


def product_kinds(
    capsys: pytest.CaptureFixture[str], file: Path, options: list[str]
) -> tuple[int, list[str]]:
    code, out, err = run_cli(capsys, "--json", "audit", "verify", str(file), *options)
    assert out, err
    return code, sorted({finding["kind"] for finding in json.loads(out)["findings"]})


def independent_kinds(file: Path, options: list[str]) -> list[str]:
    named = dict(zip(options[::2], options[1::2], strict=False))
    trusted = named.get("--trusted-key")
    verdict = spec.verify(
        file.read_text().splitlines(),
        trusted_key=None if trusted is None else _public(trusted),
        expect_head=None if "--expect-head" not in named else bytes.fromhex(named["--expect-head"]),
        require_anchored="--require-anchored" in options,
        expect_session=named.get("--session"),
    )
    return sorted(set(verdict.kinds))


def _public(text: str) -> bytes:
    path = Path(text)
    if path.exists():
        text = path.read_text()
    return base64.b64decode(text.strip().removeprefix("ed25519:"))


@pytest.mark.parametrize("vector", MANIFEST, ids=[vector["file"] for vector in MANIFEST])
def test_both_verifiers_give_each_vector_its_stated_verdict(
    capsys: pytest.CaptureFixture[str], vector: dict[str, Any]
) -> None:
    file = VECTORS / vector["file"]
    options = [str(VECTORS / o) if o.endswith(".pub") else o for o in vector["options"]]
    code, kinds = product_kinds(capsys, file, options)
    assert (code == 0) == (vector["verdict"] == "clean"), kinds
    assert kinds == vector["kinds"], vector["what"]
    assert independent_kinds(file, options) == vector["kinds"], vector["what"]
    if "-statement-v" in vector["file"]:
        # The report says which statement's rules it applied (spec §4).
        _, out, _ = run_cli(capsys, "--json", "audit", "verify", str(file))
        version = int(vector["file"].split("-statement-v")[1][0])
        assert json.loads(out)["checkpoint"]["version"] == version


def test_every_version_and_forgery_the_issue_names_has_a_vector() -> None:
    files = " ".join(vector["file"] for vector in MANIFEST)
    for name in ("v3rows", "v2batches"):
        for version in (1, 2, 3):
            for scope in ("bundle", "export"):
                assert f"genuine/{name}-statement-v{version}-{scope}.jsonl" in files
        for forgery in (
            "edited",
            "rechained",
            "dropped",
            "reordered",
            "renumbered",
            "spliced",
            "relabelled",
            "resigned",
            "truncated",
            "unsigned-field",
        ):
            assert f"{name}-bundle-{forgery}" in files
    # A store distributed by session (ADR 0067): statement v4, shards in the export only.
    for genuine in ("v4shards-statement-v4-export", "v4shards-statement-v4-bundle"):
        assert f"genuine/{genuine}.jsonl" in files
    for forgery in ("shard-forged", "shard-dropped", "shards-stripped", "shards-root-resigned"):
        assert f"forged/v4shards-export-{forgery}.jsonl" in files
    assert "forged/v4shards-bundle-sharded.jsonl" in files


def test_the_second_verifier_reads_nothing_of_sessionwire() -> None:
    """Standard library and ``cryptography`` only: what it knows is what the spec says."""
    tree = ast.parse(Path(spec.__file__).read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
        )
    }
    assert imported <= set(sys.stdlib_module_names) | {"cryptography", "__future__"}, imported


def _mutations(lines: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Every line dropped, swapped with the next, and each of its members changed by one
    (an integer plus one, a text's last character, a list's last item) or removed."""
    found: list[tuple[str, list[dict[str, Any]]]] = []
    for at, line in enumerate(lines):
        found.append((f"drop {at}", lines[:at] + lines[at + 1 :]))
        found.append((f"swap {at}", [*lines[:at], *lines[at + 1 : at + 2], line, *lines[at + 2 :]]))
        for name, value in line.items():
            if name == "type" or value is None or isinstance(value, bool | dict):
                continue
            if isinstance(value, int):
                changed: Any = value + 1
            elif isinstance(value, str):
                changed = value[:-1] + ("1" if value.endswith("0") else "0")
            else:
                changed = value[:-1]
            gone = {k: v for k, v in line.items() if k != name}
            for what, replaced in (
                (f"{at}.{name}", {**line, name: changed}),
                (f"{at}.-{name}", gone),
            ):
                found.append((what, [*lines[:at], replaced, *lines[at + 1 :]]))
    return found


@pytest.mark.parametrize(
    "name",
    [
        "v3rows-statement-v3-bundle",
        "v2batches-statement-v2-bundle",
        "v3forks-statement-v3-export",
        "v4shards-statement-v4-export",
    ],
)
def test_both_verifiers_agree_on_single_changes_to_a_genuine_bundle(name: str) -> None:
    """Every sixth of a file's single edits, removals and swaps (70 and 174 of the
    bundles, so the suite stays quick; the export with forks: its fork events' states
    edited too, §5.2 step 7): both verifiers decide each alike. Run once over all of them,
    on four genuine files with and without the options, 4,858 agreed; before, 32 did not
    (a malformed header made the product verify the rest as a bundle)."""
    from sessionwire.application.audit.verify_file import verify_file

    lines = [
        json.loads(line) for line in (VECTORS / f"genuine/{name}.jsonl").read_text().splitlines()
    ]
    # The distributed store's files are the first store's log (make_vectors.py).
    store = name.split("-statement")[0].replace("v4shards", "v3rows")
    options: dict[str, Any] = {
        "trusted_key": _public(str(VECTORS / "key.pub")),
        "expect_head": bytes.fromhex((VECTORS / f"genuine/{store}.head").read_text().strip()),
        "require_anchored": True,
    }
    for what, changed in _mutations(lines)[::6]:
        text = [json.dumps(line) for line in changed]
        product = sorted({finding.kind for finding in verify_file(text, **options).findings})
        assert product == sorted(set(spec.verify(text, **options).kinds)), what


# Worked hash examples --------------------------------------------------------------------


def _example(name: str) -> dict[str, Any]:
    return next(example for example in EXAMPLES if example["construction"] == name)


def _sha_matches(example: dict[str, Any]) -> None:
    assert spec.sha(bytes.fromhex(example["input_hex"])).hex() == example["digest_hex"]


def test_stream_and_log_hash_examples() -> None:
    example = _example("stream_hash")
    _sha_matches(example)
    fields = example["fields"]
    previous, state = bytes.fromhex(fields["previous"]), bytes.fromhex(fields["state_hex"])
    oid = UUID(fields["originator_id"])
    content = RecordContent(oid, fields["originator_version"], fields["topic"], state)
    own = stream_hash(previous, content)
    assert own.hex() == example["digest_hex"]
    assert own == spec.stream_hash(
        previous, oid.bytes, fields["originator_version"], fields["topic"], state
    )
    example = _example("log_hash")
    _sha_matches(example)
    fields = example["fields"]
    args = (
        bytes.fromhex(fields["previous"]),
        fields["notification_id"],
        bytes.fromhex(fields["stream_hash"]),
    )
    assert log_hash(*args).hex() == example["digest_hex"] == spec.log_hash(*args).hex()


def test_tree_examples() -> None:
    example = _example("head_leaf")
    _sha_matches(example)
    fields = example["fields"]
    head = StreamHead(
        UUID(fields["originator_id"]), fields["version"], bytes.fromhex(fields["stream_hash"])
    )
    assert head.leaf().hex() == example["digest_hex"]
    data = spec.head_data(head.originator_id.bytes, head.version, head.stream_hash)
    assert data.hex() == fields["leaf_data_hex"]
    assert spec.leaf(data).hex() == example["digest_hex"]
    example = _example("node")
    _sha_matches(example)
    left, right = (
        bytes.fromhex(example["fields"]["left"]),
        bytes.fromhex(example["fields"]["right"]),
    )
    assert merkle.node_hash(left, right).hex() == example["digest_hex"]
    assert spec.node(left, right).hex() == example["digest_hex"]
    roots = [example for example in EXAMPLES if example["construction"] == "merkle_root"]
    assert len(roots) == 8  # 0 to 7 leaves: the empty tree, odd nodes at every level
    for example in roots:
        leaves = [bytes.fromhex(data) for data in example["fields"]["leaf_data_hex"]]
        assert merkle.root([merkle.leaf_hash(d) for d in leaves]).hex() == example["digest_hex"]
        assert spec.tree_root([spec.leaf(d) for d in leaves]).hex() == example["digest_hex"]
    example = _example("inclusion_proof")
    fields = example["fields"]
    leaves = [bytes([i]) for i in range(fields["tree_size"])]
    tree = merkle.Tree([merkle.leaf_hash(d) for d in leaves])
    assert [step.hex() for step in tree.inclusion_proof(fields["index"])] == fields["path"]
    path = [bytes.fromhex(step) for step in fields["path"]]
    leaf = spec.leaf(bytes.fromhex(fields["leaf_data_hex"]))
    args = (leaf, fields["index"], fields["tree_size"], path)
    assert merkle.root_from_proof(*args) == spec.proof_root(*args)
    assert spec.proof_root(*args) is not None
    assert spec.proof_root(*args).hex() == example["digest_hex"]  # type: ignore[union-attr]


def test_order_and_members_examples() -> None:
    for version, name in ((2, "order_v1"), (3, "order_v2")):
        example = _example(name)
        _sha_matches(example)
        events = [
            OrderedEvent(
                e["log_seq"],
                e["notification_id"],
                UUID(e["originator_id"]),
                e["version"],
                bytes.fromhex(e["log_hash"]),
            )
            for e in example["fields"]["events"]
        ]
        assert order_digest(events, statement_version=version).hex() == example["digest_hex"]
        plain = [
            (e.log_seq, e.notification_id, e.originator_id.bytes, e.version, e.log_hash)
            for e in events
        ]
        assert spec.order_digest(version, plain).hex() == example["digest_hex"]
    for version in (2, 3):
        example = _example(f"members_leaf_statement_v{version}")
        _sha_matches(example)
        fields = example["fields"]
        heads = [
            StreamHead(UUID(s["originator_id"]), s["version"], bytes.fromhex(s["stream_hash"]))
            for s in fields["streams"]
        ]
        members = SessionMembers(fields["key"], heads, bytes.fromhex(fields["order"]), version)
        assert members.leaf().hex() == example["digest_hex"]
        data = spec.members_data(
            version,
            fields["key"],
            [spec.Head(h.originator_id.bytes, h.version, h.stream_hash) for h in heads],
            bytes.fromhex(fields["order"]),
        )
        assert data.hex() == fields["leaf_data_hex"]


def test_shard_examples() -> None:
    """§3.8 and §3.9, reproduced from their fields by the domain and by the second verifier."""
    from sessionwire.domain.checkpoint import ShardHead
    from sessionwire.domain.hash_chain import shard_log_hash

    example = _example("shard_hash")
    _sha_matches(example)
    fields = example["fields"]
    args = (
        bytes.fromhex(fields["previous"]),
        fields["notification_id"],
        bytes.fromhex(fields["stream_hash"]),
    )
    assert shard_log_hash(*args).hex() == example["digest_hex"] == spec.shard_hash(*args).hex()
    example = _example("shard_head_leaf")
    _sha_matches(example)
    fields = example["fields"]
    head = ShardHead(fields["shard"], fields["size"], bytes.fromhex(fields["shard_hash"]))
    assert head.leaf().hex() == example["digest_hex"]
    data = spec.shard_head_data(head.shard, head.size, head.shard_hash)
    assert data.hex() == fields["leaf_data_hex"]
    assert spec.leaf(data).hex() == example["digest_hex"]


def test_statement_examples_are_the_signed_bytes() -> None:
    for version in (1, 2, 3, 4):
        example = _example(f"statement_v{version}")
        shown = example["fields"]["statement"]
        statement = Statement.from_json(shown)
        assert statement.version == version
        assert statement.signed_bytes().hex() == example["input_hex"]
        assert spec.signed_bytes(shown).hex() == example["input_hex"]
        public = _public(example["fields"]["public_key"])
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        Ed25519PublicKey.from_public_bytes(public).verify(
            bytes.fromhex(example["digest_hex"]), bytes.fromhex(example["input_hex"])
        )
    example = _example("session_stream_id")
    key = example["fields"]["key"]
    assert session_uuid(key).hex == example["digest_hex"] == spec.session_stream(key).hex()
    example = _example("key_id")
    assert spec.key_id(bytes.fromhex(example["input_hex"])) == example["digest_hex"]


# Files the suite signs on every store -------------------------------------------------------


@pytest.fixture
async def signed_files(store_url: str, clock: VirtualClock) -> dict[str, Any]:
    gateway = await open_populated(store_url, clock)
    try:
        with audit_log_of(gateway) as log:
            sealed_now(log)
            key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
            made = make_checkpoint(log, key, now=clock.now())

            def export(session: str | None) -> list[dict[str, Any]]:
                return signed_records(log, made, session)

            return {
                "v3-bundle": export(forge.MAIN),
                "v3-export": export(None),
                "key": public_key_text(raw_public_key(key)),
                "head": made.checkpoint.statement.log_hash.hex(),
            }
    finally:
        await gateway.close()


async def test_both_verifiers_agree_on_files_signed_on_each_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signed_files: dict[str, Any]
) -> None:
    key = tmp_path / "key.pub"
    key.write_text(signed_files["key"] + "\n")
    options = [
        "--trusted-key",
        str(key),
        "--expect-head",
        signed_files["head"],
        "--require-anchored",
    ]
    # The v2-statement cases need a v2 bundle, which a store no longer signs.
    made = {**signed_files, "v2-bundle": signed_files["v3-bundle"]}
    cases = [
        (stem, lines) for stem, lines, _, _ in forge.forgeries(made, "store") if "v2" not in stem
    ]
    cases += [("bundle", made["v3-bundle"]), ("export", made["v3-export"])]
    for stem, lines in cases:
        file = tmp_path / f"{stem}.jsonl"
        forge.write(file, lines)
        code, kinds = product_kinds(capsys, file, options)
        assert kinds == independent_kinds(file, options), stem
        if stem in ("bundle", "export"):
            assert (code, kinds) == (0, []), stem
        else:
            assert code == 1, stem
