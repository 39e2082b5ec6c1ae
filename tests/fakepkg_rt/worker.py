from . import CALLS
from ._jit import jit


@jit(constexprs=("BLOCK_SIZE",))
def _slot_kernel(num_tokens, positions_ptr, slot_mapping_ptr, BLOCK_SIZE=1024):
    CALLS.append(("slot_kernel", num_tokens, positions_ptr, slot_mapping_ptr, BLOCK_SIZE))


class SlotMappingOwner:
    kernel = _slot_kernel  # a kernel held as a class attribute

    def run(self, n, positions, slots):
        type(self).kernel[(1,)](num_tokens=n, positions_ptr=positions, slot_mapping_ptr=slots)


class StaticOwner:
    """vLLM's ComputeSlotMappingKernel shape: ``@staticmethod`` over the kernel (Triton absent:
    a plain function), launched through ``self.kernel``."""

    @staticmethod
    def kernel(num_tokens, positions_ptr, BLOCK_SIZE=64):
        CALLS.append(("static_kernel", num_tokens, positions_ptr, BLOCK_SIZE))

    def run(self, n, positions):
        kernel = self.kernel
        if hasattr(type(kernel), "__getitem__"):
            kernel[(1,)](num_tokens=n, positions_ptr=positions)
        else:
            kernel(num_tokens=n, positions_ptr=positions)
