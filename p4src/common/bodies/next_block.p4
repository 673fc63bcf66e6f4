/* Register-action body of the next block (docs/protocol.md section 11); see
 * contributor_bitmap.p4 for what a body is. bit<32> per (slot, version): the minimum of
 * key = next_block[23:0] ++ ~next_exponent over the round; the first contributor
 * overwrites. rv = the minimum after this packet. */
#ifndef P4REDUCE_BODIES_NEXT_BLOCK_P4
#define P4REDUCE_BODIES_NEXT_BLOCK_P4
#define NEXT_KEY_BODY                                                          \
    if (meta.first == 1 || meta.announced_key < value) {                       \
        value = meta.announced_key;                                            \
    }                                                                          \
    rv = value;
#endif
