/* Register-action bodies of the value lanes (docs/protocol.md section 10); see
 * contributor_bitmap.p4 for what a body is. Lanes come in pairs, one pair_t cell per
 * (slot, version) and register array: a stateful ALU of a Tofino-class switch updates both
 * 32-bit halves of one cell at once (SwitchML's layout), so 64 lanes take 32 ALUs.
 * The first contributor of a round overwrites (a SKIP contributes zeros), later ones add.
 * rv = the high lane's sum; the low lane's is in `value` (v1model reads it there; a Tofino
 * pipeline returns one value per ALU and reads the low halves in a second pass). */
#ifndef P4REDUCE_BODIES_VALUE_AGGREGATION_P4
#define P4REDUCE_BODIES_VALUE_AGGREGATION_P4
#define LANE_PAIR_ADD_BODY(IN_LO, IN_HI)                                       \
    if (meta.first == 1) {                                                     \
        value.lo = IN_LO;                                                      \
        value.hi = IN_HI;                                                      \
    } else {                                                                   \
        value.lo = value.lo + IN_LO;                                           \
        value.hi = value.hi + IN_HI;                                           \
    }                                                                          \
    rv = value.hi;

#define LANE_PAIR_READ_BODY                                                    \
    rv = value.hi;

/* Round overflow (bit<1> per (slot, version)): sticky for the round; the first
 * contributor restarts it. rv = the round's overflow so far. */
#define ROUND_OVERFLOW_BODY                                                    \
    if (meta.first == 1) {                                                     \
        value = meta.lane_overflow;                                            \
    } else {                                                                   \
        value = value | meta.lane_overflow;                                    \
    }                                                                          \
    rv = value;
#endif
