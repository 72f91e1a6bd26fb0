"""Click sessions: pairs and weights (log), simulation with a known truth (simulate) and
off-policy value (offpolicy); what a replayed log tells is :mod:`stream.clickeval`."""
