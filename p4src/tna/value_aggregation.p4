/* Value aggregation on TNA (../v1model/value_aggregation.p4 explains the protocol side).
 * Lanes come in pairs: one Register of pair_t per pair, 32 stateful ALUs for 64 lanes, as
 * SwitchML does; pair p adds lane p (values_0) and lane p + 32 (values_1). The steps are
 * the shared bodies of ../common/bodies/value_aggregation.p4 (LANE_UPDATE, the same
 * arithmetic the v1model program runs per lane). An ALU returns one value: the
 * contribution pass puts each pair's high sum into the packet, and a packet that becomes a
 * RESULT with values takes a second pass (`harvest`) that reads the low halves. int32
 * overflow is not detected here (an ALU cannot return the sum and the overflow bit of both
 * lanes): see docs/tofino.md for what the TNA program does instead. */
#ifndef P4REDUCE_TNA_VALUE_AGGREGATION_P4
#define P4REDUCE_TNA_VALUE_AGGREGATION_P4
#define LANE_OP_NONE 3w0
#define LANE_OP_ADD 3w1
#define LANE_OP_FIRST 3w2
#define LANE_OP_READ_HIGH 3w3
#define LANE_OP_READ_LOW 3w4     /* bit 2: the read-out pass (round_winner.p4) */
#define LANE_OP_READ_OUT 3w5     /* the read-out pass of a RESULT without values */

/* The pairs, run with the bridge header's lane_op (LaneOp below decides it). */
/* Tofino 1 with the winner check (the production build): the lane pass's 32 pairs are
 * pinned to the stages around the first pass's stateful steps (winner check and slot epoch,
 * bitmap, next key and fingerprint: stages 4 to 7), four per stage. Left to itself,
 * bf-p4c 9.13.4 placed pairs beside those steps, ran out of stateful ALUs ("too many meter
 * alu users") and retried placement for longer than 15 minutes. */
#if P4REDUCE_LANE_PASS && P4REDUCE_WINNER_CHECK
#define PAIR_STAGE_0 0
#define PAIR_STAGE_1 0
#define PAIR_STAGE_2 0
#define PAIR_STAGE_3 0
#define PAIR_STAGE_4 1
#define PAIR_STAGE_5 1
#define PAIR_STAGE_6 1
#define PAIR_STAGE_7 1
#define PAIR_STAGE_8 2
#define PAIR_STAGE_9 2
#define PAIR_STAGE_10 2
#define PAIR_STAGE_11 2
#define PAIR_STAGE_12 3
#define PAIR_STAGE_13 3
#define PAIR_STAGE_14 3
#define PAIR_STAGE_15 3
#define PAIR_STAGE_16 8
#define PAIR_STAGE_17 8
#define PAIR_STAGE_18 8
#define PAIR_STAGE_19 8
#define PAIR_STAGE_20 9
#define PAIR_STAGE_21 9
#define PAIR_STAGE_22 9
#define PAIR_STAGE_23 9
#define PAIR_STAGE_24 10
#define PAIR_STAGE_25 10
#define PAIR_STAGE_26 10
#define PAIR_STAGE_27 10
#define PAIR_STAGE_28 11
#define PAIR_STAGE_29 11
#define PAIR_STAGE_30 11
#define PAIR_STAGE_31 11
#define LANE_PAIR_STAGE(p) @stage(PAIR_STAGE_##p)
#else
#define LANE_PAIR_STAGE(p)
#endif

control ValueAggregation(inout headers_t hdr, inout metadata_t meta) {
    /* What every pair does to this packet: one step per pair's table, as SwitchML's
     * Processor does. bf-p4c allows one stateful ALU operation per action, so each pair has
     * its own actions and its own (constant) table choosing among them. The first
     * contributor's step (overwrite) and a later one's (add) are two steps of the same
     * body: a Tofino ALU reads at most two PHV fields, here the pair's two lanes, so
     * meta.first chooses the step instead of being read by it. */
#define LANE_PAIR_STEPS(p, l, h)                                               \
    Register<pair_t, bit<16>>(SLOT_ENTRIES, {0, 0}) lanes_##p;                 \
    PAIR_ACTION(bit<16>, lanes_##p, first_##p,                                 \
                LANE_PAIR_ADD_BODY(hdr.values_0.v##l, hdr.values_1.v##h, 1w1)) \
    PAIR_ACTION(bit<16>, lanes_##p, add_##p,                                   \
                LANE_PAIR_ADD_BODY(hdr.values_0.v##l, hdr.values_1.v##h, 1w0)) \
    PAIR_ACTION(bit<16>, lanes_##p, read_high_##p, LANE_PAIR_READ_BODY)        \
    PAIR_ACTION(bit<16>, lanes_##p, read_low_##p, LANE_PAIR_READ_LOW_BODY)     \
    action first_values_##p() {                                                \
        hdr.values_1.v##h = first_##p.execute(meta.slot_index_16);             \
    }                                                                          \
    action add_values_##p() {                                                  \
        hdr.values_1.v##h = add_##p.execute(meta.slot_index_16);               \
    }                                                                          \
    action read_high_values_##p() {                                            \
        hdr.values_1.v##h = read_high_##p.execute(meta.slot_index_16);         \
    }                                                                          \
    action read_low_values_##p() {                                             \
        hdr.values_0.v##l = read_low_##p.execute(meta.slot_index_16);          \
    }                                                                          \
    LANE_PAIR_STAGE(p)                                                         \
    table pair_##p {                                                           \
        key = { hdr.bridge.lane_op: exact; }                                              \
        actions = { first_values_##p; add_values_##p; read_high_values_##p;    \
                    read_low_values_##p; NoAction; }                           \
        const entries = {                                                      \
            LANE_OP_FIRST: first_values_##p();                                 \
            LANE_OP_ADD: add_values_##p();                                     \
            LANE_OP_READ_HIGH: read_high_values_##p();                         \
            LANE_OP_READ_LOW: read_low_values_##p();                           \
        }                                                                      \
        const default_action = NoAction();                                     \
        size = 5;                                                              \
    }
    FOR_EACH_LANE_PAIR(LANE_PAIR_STEPS)

    apply {
#define LANE_PAIR_APPLY(p, l, h) pair_##p.apply();
        FOR_EACH_LANE_PAIR(LANE_PAIR_APPLY)
    }
}

/* What the pairs do to this packet (hdr.bridge.lane_op), decided in its first pass. On
 * Tofino 2 the pairs run later in the same pass; on Tofino 1 in the lane pass
 * (P4REDUCE_LANE_PASS, bridge.p4). */
control LaneOp(inout headers_t hdr, inout metadata_t meta) {
    action zero_values() {
        hdr.values_0.setValid();
        hdr.values_1.setValid();
#define LANE_ZERO_0(i) hdr.values_0.v##i = 0;
#define LANE_ZERO_1(i) hdr.values_1.v##i = 0;
        FOR_EACH_LANE_0(LANE_ZERO_0)
        FOR_EACH_LANE_1(LANE_ZERO_1)
    }
    action set_lane_op(bit<3> op) {
        hdr.bridge.lane_op = op;
    }

    apply {
        meta.lane_overflow = 0;
        meta.round_overflow = 0;
        /* Decided from the bitmap alone (not from the round count, a stage later): a SKIP
         * adds zeros (a no-op, except for the first contributor, who stores them), and a
         * duplicate reads the high sums whether its round is done (a cached RESULT) or not
         * (a STATUS, which carries no values). A DATA duplicate's low lanes are its own
         * values until the harvest pass overwrites them. */
        if (hdr.p4r.msg_type != MSG_ANNOUNCE) {
            if (hdr.p4r.msg_type == MSG_SKIP) {
                zero_values();
            }
            if (meta.seen != 0) {
                set_lane_op(LANE_OP_READ_HIGH);
#if P4REDUCE_WINNER_CHECK
            } else if (meta.in_round == 0) {
                /* stale: the lanes are left alone (lane_op stays NONE) */
#endif
            } else if (meta.first == 1) {
                set_lane_op(LANE_OP_FIRST);
            } else {
                set_lane_op(LANE_OP_ADD);
            }
        }
    }
}
#endif
