from . import CALLS
from ._jit import jit


@jit(constexprs=("MAX_NUM_TOKENS",))
def expand_kernel(
    output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS=16
):
    CALLS.append(
        (
            "expand_kernel",
            output_ptr,
            input_ptr,
            cu_num_tokens_ptr,
            replace_from,
            replace_to,
            MAX_NUM_TOKENS,
        )
    )


@jit(constexprs=("BLOCK_SIZE",))
def copy_kernel(src_ptr, dst_ptr, n, src_stride, BLOCK_SIZE=128):
    CALLS.append(("copy_kernel", src_ptr, dst_ptr, n, src_stride, BLOCK_SIZE))


def launch_expand(output, input, cu):
    # Global lookup at launch time, as vLLM's module-level launchers do.
    expand_kernel[(len(cu),)](
        output_ptr=output,
        input_ptr=input,
        cu_num_tokens_ptr=cu,
        replace_from=0,
        replace_to=1,
        MAX_NUM_TOKENS=8,
    )
