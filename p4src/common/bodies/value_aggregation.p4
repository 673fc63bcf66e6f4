/* Register-action bodies of the value lanes (docs/protocol.md section 10); see
 * contributor_bitmap.p4 for what a body is.
 *
 * LANE_UPDATE is a lane's arithmetic, written once: the first contributor of a round
 * (FIRST == 1) overwrites (a SKIP contributes zeros), later ones add. v1model passes
 * meta.first; TNA has one step with FIRST = 1 and one with FIRST = 0 and chooses between
 * them by table, because a Tofino stateful ALU takes at most two PHV inputs and the two
 * lanes of a pair are already two (SwitchML's write_read1/sum_read1). A stateful ALU of a Tofino-class
 * switch updates both 32-bit halves of one cell at once, so the TNA program keeps lanes in
 * pairs (pair_t cells, SwitchML's layout: 64 lanes in 32 ALUs) and runs LANE_PAIR_ADD_BODY;
 * bmv2 pays per primitive, not per bit, so the v1model program keeps a whole block in one
 * wide register cell and runs LANE_ADD_BODY on it (packed jobs) or its SWAR form (lanes
 * jobs: v1model/value_aggregation.p4). Both are LANE_UPDATE. A Tofino ALU returns one
 * value: rv is the high lane's sum there, and the low halves are read in a second pass. */
#ifndef P4REDUCE_BODIES_VALUE_AGGREGATION_P4
#define P4REDUCE_BODIES_VALUE_AGGREGATION_P4
#define LANE_UPDATE(CELL, IN, FIRST)                                           \
    CELL = (FIRST == 1) ? IN : CELL + IN;

#define LANE_ADD_BODY(IN)                                                      \
    LANE_UPDATE(value, IN, meta.first)                                         \
    rv = value;

#define LANE_PAIR_ADD_BODY(IN_LO, IN_HI, FIRST)                                \
    LANE_UPDATE(value.lo, IN_LO, FIRST)                                        \
    LANE_UPDATE(value.hi, IN_HI, FIRST)                                        \
    rv = value.hi;

#define LANE_PAIR_READ_BODY                                                    \
    rv = value.hi;

#define LANE_PAIR_READ_LOW_BODY                                                \
    rv = value.lo;

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
