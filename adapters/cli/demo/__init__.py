"""``sessionwire demo``: a scripted team of agents playing a scenario on simulated time."""
