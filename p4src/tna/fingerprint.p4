/* Fingerprint on TNA (../v1model/fingerprint.p4 explains it): the range of a round's
 * fingerprints in one pair register, `fingerprint_range` (lo = minimum, hi = maximum), one
 * stateful ALU updating both halves (FINGERPRINT_RANGE_BODY of
 * ../common/bodies/fingerprint.p4). Its step is chosen by a table from the bitmap's answer
 * in the stage after it, as the lane pairs' are (value_aggregation.p4). A Tofino 1 ALU
 * returns one value: an ANNOUNCE's step returns the maximum, and the read-out pass of the
 * round's RESULT (every RESULT takes one, round_winner.p4) reads the minimum; the RESULT
 * leaves with both. Declared in P4ReduceIngress itself (FINGERPRINT_DECLARATIONS), as the
 * pairs are: the first pass's table and the read-out pass's use the one register. */
#ifndef P4REDUCE_TNA_FINGERPRINT_P4
#define P4REDUCE_TNA_FINGERPRINT_P4

#define FINGERPRINT_DECLARATIONS                                               \
    Register<pair_t, bit<16>>(SLOT_ENTRIES, {0, 0}) fingerprint_range;         \
    PAIR_ACTION(bit<16>, fingerprint_range, range_first_step,                  \
                FINGERPRINT_RANGE_BODY(1w1))                                   \
    PAIR_ACTION(bit<16>, fingerprint_range, range_widen_step,                  \
                FINGERPRINT_RANGE_BODY(1w0))                                   \
    PAIR_ACTION(bit<16>, fingerprint_range, range_max_step, LANE_PAIR_READ_BODY) \
    PAIR_ACTION(bit<16>, fingerprint_range, range_min_step,                    \
                LANE_PAIR_READ_LOW_BODY)                                       \
    action first_range() {                                                     \
        hdr.fingerprint.fingerprint_max = range_first_step.execute(meta.slot_index_16); \
    }                                                                          \
    action widen_range() {                                                     \
        hdr.fingerprint.fingerprint_max = range_widen_step.execute(meta.slot_index_16); \
    }                                                                          \
    action read_max() {                                                        \
        hdr.fingerprint.fingerprint_max = range_max_step.execute(meta.slot_index_16); \
    }                                                                          \
    action read_min() {                                                        \
        hdr.fingerprint.fingerprint_min = range_min_step.execute(meta.slot_index_16); \
    }                                                                          \
    /* an admitted ANNOUNCE (lane_op ANNOUNCE: its fingerprint is parsed), or the  \
     * read-out pass of a RESULT without values (READ_OUT; a header-only one reads  \
     * into an invalid header) */                                              \
    PROTOCOL_TAIL_STAGE                                                        \
    table range_step {                                                         \
        key = { CONTRIBUTION_KEY }                                             \
        actions = { first_range; widen_range; read_max; read_min; NoAction; }  \
        const entries = {                                                      \
            CONTRIBUTION_ENTRIES(LANE_OP_ANNOUNCE, read_max, first_range,      \
                                 widen_range)                                  \
            (LANE_OP_READ_OUT, _, _, _, _): read_min();                        \
            STORE_ENTRY(first_range)                                           \
        }                                                                      \
        const default_action = NoAction();                                     \
        size = 40;                                                             \
    }
#endif
