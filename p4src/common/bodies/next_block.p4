/* Register-action body of the next block (docs/protocol.md section 11); see
 * contributor_bitmap.p4 for what a body is. bit<32> per (slot, version): the minimum of
 * KEY = next_block[23:0] ++ ~next_exponent over the round; the first contributor
 * overwrites. rv = the minimum after this packet. (v1model keeps KEY in
 * meta.announced_key; TNA in the packet's next_block field, saving PHV.) */
#ifndef P4REDUCE_BODIES_NEXT_BLOCK_P4
#define P4REDUCE_BODIES_NEXT_BLOCK_P4
#define NEXT_KEY_STEP_BODY(KEY, FIRST)                                         \
    if (FIRST == 1 || KEY < value) {                                           \
        value = KEY;                                                           \
    }                                                                          \
    rv = value;

/* v1model: FIRST is meta.first; TNA has one step per case (FIRST a constant), chosen by
 * table from the bitmap's answer in the stage after it (next_block.p4) */
#define NEXT_KEY_BODY(KEY) NEXT_KEY_STEP_BODY(KEY, meta.first)
#endif
