"""Launch cases for Model Runner V2's spec kernels (see ``fdkit.mrv2``)."""

#: contract name -> case(rng, idx, scale)
CASES = {}
