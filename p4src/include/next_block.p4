/* Next block and its exponent. Every packet announces the sender's next non-zero block in
 * this slot's stream and that block's biased exponent. The round's result must carry the
 * minimum announced block and the maximum exponent among the senders announcing it. Both
 * come from ONE minimum: key = next_block[23:0] ++ ~next_exponent, so a smaller block wins
 * and, for equal blocks, a larger exponent (smaller complement) wins. One register, one
 * read-modify-write per packet. */
#ifndef P4REDUCE_NEXT_BLOCK_P4
#define P4REDUCE_NEXT_BLOCK_P4
#include "headers.p4"

control NextBlock(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(SLOT_ENTRIES) next_key;

    action take_minimum() {
        bit<32> announced = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
        bit<32> current;
        next_key.read(current, meta.slot_index);
        bit<32> smallest = (announced < current) ? announced : current;
        smallest = (meta.first == 1) ? announced : smallest;
        next_key.write(meta.slot_index, smallest);
        meta.next_key = smallest;
    }
    action read_minimum() {
        next_key.read(meta.next_key, meta.slot_index);
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
