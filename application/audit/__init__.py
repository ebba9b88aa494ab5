"""The auditor's questions: timelines, past states, export/import, verification, imports."""
