from .kernels import expand_kernel  # a copy of the reference, rebound separately


def launch_copy_of_expand(output, input, cu):
    expand_kernel[(1,)](output, input, cu, 0, 1, 8)  # positional launch
