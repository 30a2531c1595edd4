"""dpcausal: differentially private causal-effect releases."""
