/* Register-action body of the round counter (docs/protocol.md section 9); see
 * contributor_bitmap.p4 for what a body is. bit<8> per (slot, version). The first
 * contributor restarts the count, a new contributor adds one, a duplicate only reads it.
 * rv = the count after this packet. NEW_CONTRIBUTOR: the sender was not counted yet (v1model:
 * meta.duplicate == 0; TNA reads the bitmap's verdict a stage earlier, meta.seen == 0). */
#ifndef P4REDUCE_BODIES_ROUND_COUNTER_P4
#define P4REDUCE_BODIES_ROUND_COUNTER_P4
#define ROUND_COUNT_BODY(NEW_CONTRIBUTOR)                                      \
    if (meta.first == 1) {                                                     \
        value = 1;                                                             \
    } else if (NEW_CONTRIBUTOR) {                                              \
        value = value + 1;                                                     \
    }                                                                          \
    rv = value;
#endif
