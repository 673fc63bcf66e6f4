/* Next block and its exponent (docs/protocol.md section 11), v1model. Every packet
 * announces the sender's next non-zero block in this slot's stream and that block's biased
 * exponent. The round's result must carry the minimum announced block and the maximum
 * exponent among the senders announcing it. Both come from ONE minimum: key =
 * next_block[23:0] ++ ~next_exponent, so a smaller block wins and, for equal blocks, a
 * larger exponent (smaller complement) wins. One register, one read-modify-write per packet;
 * the stateful steps are the shared bodies of common/bodies/. */
#ifndef P4REDUCE_NEXT_BLOCK_P4
#define P4REDUCE_NEXT_BLOCK_P4
#include "../common/headers.p4"
#include "../common/bodies/next_block.p4"
#include "../common/bodies/read.p4"
#include "register_step.p4"

control NextBlock(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(SLOT_ENTRIES) next_key;

    action take_minimum() {
        meta.announced_key = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
        REGISTER_STEP(next_key, meta.slot_index, bit<32>, meta.next_key, NEXT_KEY_BODY(meta.announced_key))
    }
    action read_minimum() {
        REGISTER_STEP(next_key, meta.slot_index, bit<32>, meta.next_key, READ_BODY)
    }

    apply {
        if (meta.duplicate == 0) {
            take_minimum();
        } else {
            read_minimum();
        }
    }
}
#endif
