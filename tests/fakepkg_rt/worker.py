from ._jit import jit
from . import CALLS


@jit(constexprs=("BLOCK_SIZE",))
def _slot_kernel(num_tokens, positions_ptr, slot_mapping_ptr, BLOCK_SIZE=1024):
    CALLS.append(("slot_kernel", num_tokens, positions_ptr, slot_mapping_ptr, BLOCK_SIZE))


class SlotMappingOwner:
    kernel = _slot_kernel  # a kernel held as a class attribute

    def run(self, n, positions, slots):
        type(self).kernel[(1,)](num_tokens=n, positions_ptr=positions, slot_mapping_ptr=slots)
