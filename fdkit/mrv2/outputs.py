"""Launch cases for Model Runner V2's outputs kernels (see ``fdkit.mrv2``)."""

#: contract name -> case(rng, idx, scale)
CASES = {}
