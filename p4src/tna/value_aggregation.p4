/* Value aggregation on TNA (../v1model/value_aggregation.p4 explains the protocol side).
 * Lanes come in pairs: one Register of pair_t per pair, LANES/2 stateful ALUs, as SwitchML
 * does; pair p adds lane p (values_0) and lane p + LANES/2 (values_1). The steps are the
 * shared bodies of ../common/bodies/value_aggregation.p4 (LANE_UPDATE, the same arithmetic
 * the v1model program runs per lane). An ALU returns one value: the contribution pass puts
 * each pair's high sum into the packet, and a packet that becomes a RESULT with values takes
 * the read-out pass (`harvest`), which reads the low halves. int32 overflow is not detected
 * here (an ALU cannot return the sum and the overflow bit of both lanes): see docs/tofino.md
 * for what the TNA program does instead. */
#ifndef P4REDUCE_TNA_VALUE_AGGREGATION_P4
#define P4REDUCE_TNA_VALUE_AGGREGATION_P4
/* What the pairs (and the fingerprint range) do to a packet: meta.lane_op, copied from the
 * bridge header in a recirculated pass. The first three are decided by the first pass for
 * the lane pass (P4REDUCE_LANE_PASS: Tofino 1's test build); CONTRIBUTE and ANNOUNCE mark
 * an admitted contribution whose step the pair's table chooses from the bitmap's answer;
 * bit 2 of the bridge's lane_op marks the read-out pass (round_winner.p4). */
#define LANE_OP_NONE 3w0
#define LANE_OP_ADD 3w1
#define LANE_OP_FIRST 3w2
#define LANE_OP_READ_HIGH 3w3
#define LANE_OP_READ_LOW 3w4     /* the read-out pass of a RESULT with values */
#define LANE_OP_READ_OUT 3w5     /* the read-out pass of a RESULT without values */
#define LANE_OP_CONTRIBUTE 3w6   /* first pass: a DATA or SKIP that passed admission */
#define LANE_OP_ANNOUNCE 3w7     /* first pass: an ANNOUNCE that passed admission */
/* leaf role (uplink.p4): the first pass of the spine's RESULT that a round stores -- its
 * lanes, key and fingerprint range overwrite the round's. Only one-pass builds have the
 * role, whose first pass never carries the lane pass's READ_HIGH: so its value. */
#define LANE_OP_STORE 3w3
/* ... and the entry of each step's table that stores it: the RESULT's round is complete
 * here (its bitmap half, which the RESULT's bitmap step only reads: uplink.p4) */
#if P4REDUCE_LEAF_ROLE
#define STORE_ENTRY(STORE) (LANE_OP_STORE, _, _, _, ROUND_COMPLETE): STORE();
#else
#define STORE_ENTRY(STORE)
#endif

/* The step of a contribution, from the bitmap step's answer in the stage right after it
 * (SwitchML's Processor keys its table on bitmap_before the same way): a key of
 * (lane_op, state_lost, in_round, rank, bitmap_before) and constant ternary entries, so
 * that no stage is spent turning the answer into flags first. Highest priority first:
 * the slot lost the job's state: nothing; the sender's bit is in the round's bitmap (a
 * duplicate; a complete round holds every bit): read; the winner check refused it (stale):
 * nothing; the round's first contributor (bitmap 0, also after an epoch reset):
 * overwrite; else add. DUPLICATE_r is rank r's entry. */
#define DUPLICATE_0(OP, ACTION) (OP, _, _, 5w0, 32w1 &&& 32w1): ACTION();
#define DUPLICATE_1(OP, ACTION) (OP, _, _, 5w1, 32w2 &&& 32w2): ACTION();
#define DUPLICATE_2(OP, ACTION) (OP, _, _, 5w2, 32w4 &&& 32w4): ACTION();
#define DUPLICATE_3(OP, ACTION) (OP, _, _, 5w3, 32w8 &&& 32w8): ACTION();
#define DUPLICATE_4(OP, ACTION) (OP, _, _, 5w4, 32w16 &&& 32w16): ACTION();
#define DUPLICATE_5(OP, ACTION) (OP, _, _, 5w5, 32w32 &&& 32w32): ACTION();
#define DUPLICATE_6(OP, ACTION) (OP, _, _, 5w6, 32w64 &&& 32w64): ACTION();
#define DUPLICATE_7(OP, ACTION) (OP, _, _, 5w7, 32w128 &&& 32w128): ACTION();
#define DUPLICATE_8(OP, ACTION) (OP, _, _, 5w8, 32w256 &&& 32w256): ACTION();
#define DUPLICATE_9(OP, ACTION) (OP, _, _, 5w9, 32w512 &&& 32w512): ACTION();
#define DUPLICATE_10(OP, ACTION) (OP, _, _, 5w10, 32w1024 &&& 32w1024): ACTION();
#define DUPLICATE_11(OP, ACTION) (OP, _, _, 5w11, 32w2048 &&& 32w2048): ACTION();
#define DUPLICATE_12(OP, ACTION) (OP, _, _, 5w12, 32w4096 &&& 32w4096): ACTION();
#define DUPLICATE_13(OP, ACTION) (OP, _, _, 5w13, 32w8192 &&& 32w8192): ACTION();
#define DUPLICATE_14(OP, ACTION) (OP, _, _, 5w14, 32w16384 &&& 32w16384): ACTION();
#define DUPLICATE_15(OP, ACTION) (OP, _, _, 5w15, 32w32768 &&& 32w32768): ACTION();
#define DUPLICATE_16(OP, ACTION) (OP, _, _, 5w16, 32w65536 &&& 32w65536): ACTION();
#define DUPLICATE_17(OP, ACTION) (OP, _, _, 5w17, 32w131072 &&& 32w131072): ACTION();
#define DUPLICATE_18(OP, ACTION) (OP, _, _, 5w18, 32w262144 &&& 32w262144): ACTION();
#define DUPLICATE_19(OP, ACTION) (OP, _, _, 5w19, 32w524288 &&& 32w524288): ACTION();
#define DUPLICATE_20(OP, ACTION) (OP, _, _, 5w20, 32w1048576 &&& 32w1048576): ACTION();
#define DUPLICATE_21(OP, ACTION) (OP, _, _, 5w21, 32w2097152 &&& 32w2097152): ACTION();
#define DUPLICATE_22(OP, ACTION) (OP, _, _, 5w22, 32w4194304 &&& 32w4194304): ACTION();
#define DUPLICATE_23(OP, ACTION) (OP, _, _, 5w23, 32w8388608 &&& 32w8388608): ACTION();
#define DUPLICATE_24(OP, ACTION) (OP, _, _, 5w24, 32w16777216 &&& 32w16777216): ACTION();
#define DUPLICATE_25(OP, ACTION) (OP, _, _, 5w25, 32w33554432 &&& 32w33554432): ACTION();
#define DUPLICATE_26(OP, ACTION) (OP, _, _, 5w26, 32w67108864 &&& 32w67108864): ACTION();
#define DUPLICATE_27(OP, ACTION) (OP, _, _, 5w27, 32w134217728 &&& 32w134217728): ACTION();
#define DUPLICATE_28(OP, ACTION) (OP, _, _, 5w28, 32w268435456 &&& 32w268435456): ACTION();
#define DUPLICATE_29(OP, ACTION) (OP, _, _, 5w29, 32w536870912 &&& 32w536870912): ACTION();
#define DUPLICATE_30(OP, ACTION) (OP, _, _, 5w30, 32w1073741824 &&& 32w1073741824): ACTION();
#define DUPLICATE_31(OP, ACTION) (OP, _, _, 5w31, 32w2147483648 &&& 32w2147483648): ACTION();
#define DUPLICATES(OP, ACTION) DUPLICATE_0(OP, ACTION) DUPLICATE_1(OP, ACTION) DUPLICATE_2(OP, ACTION) DUPLICATE_3(OP, ACTION) DUPLICATE_4(OP, ACTION) DUPLICATE_5(OP, ACTION) DUPLICATE_6(OP, ACTION) DUPLICATE_7(OP, ACTION) DUPLICATE_8(OP, ACTION) DUPLICATE_9(OP, ACTION) DUPLICATE_10(OP, ACTION) DUPLICATE_11(OP, ACTION) DUPLICATE_12(OP, ACTION) DUPLICATE_13(OP, ACTION) DUPLICATE_14(OP, ACTION) DUPLICATE_15(OP, ACTION) DUPLICATE_16(OP, ACTION) DUPLICATE_17(OP, ACTION) DUPLICATE_18(OP, ACTION) DUPLICATE_19(OP, ACTION) DUPLICATE_20(OP, ACTION) DUPLICATE_21(OP, ACTION) DUPLICATE_22(OP, ACTION) DUPLICATE_23(OP, ACTION) DUPLICATE_24(OP, ACTION) DUPLICATE_25(OP, ACTION) DUPLICATE_26(OP, ACTION) DUPLICATE_27(OP, ACTION) DUPLICATE_28(OP, ACTION) DUPLICATE_29(OP, ACTION) DUPLICATE_30(OP, ACTION) DUPLICATE_31(OP, ACTION)
#define CONTRIBUTION_ENTRIES(OP, READ, FIRST, UPDATE)                          \
    (OP, 1w1, _, _, _): NoAction();                                            \
    (OP, 1w0, _, _, ROUND_COMPLETE): READ();                                   \
    DUPLICATES(OP, NoAction)                                                   \
    (OP, 1w0, 1w0, _, _): NoAction();                                          \
    (OP, 1w0, 1w1, _, 32w0): FIRST();                                          \
    (OP, 1w0, 1w1, _, _): UPDATE();
#define CONTRIBUTION_KEY                                                       \
        meta.lane_op: ternary;                                                 \
        meta.state_lost: ternary;                                              \
        meta.in_round: ternary;                                                \
        hdr.p4r.rank[4:0]: ternary;                                            \
        meta.bitmap_before: ternary;

/* Tofino 1's production build (P4REDUCE_PINNED, bridge.p4): pins asking for the pairs four
 * per stage after the bitmap (stage 4), two beside the next key and the fingerprint range in
 * stage 5. bf-p4c 9.13.4 keeps the pins of pairs 0 and 1 and places the others after
 * Result's stages (a table sequence cannot run on while an if's branches are still being
 * placed on Tofino 1): resources.json records where each pair is. Left without pins, it
 * placed pairs beside the protocol's stateful steps, ran out of stateful ALUs ("too many
 * meter alu users") and retried placement for minutes. */
#if P4REDUCE_PINNED
#define PAIR_STAGE_0 5
#define PAIR_STAGE_1 5
#define PAIR_STAGE_2 6
#define PAIR_STAGE_3 6
#define PAIR_STAGE_4 6
#define PAIR_STAGE_5 6
#define PAIR_STAGE_6 7
#define PAIR_STAGE_7 7
#define PAIR_STAGE_8 7
#define PAIR_STAGE_9 7
#define PAIR_STAGE_10 8
#define PAIR_STAGE_11 8
#define PAIR_STAGE_12 8
#define PAIR_STAGE_13 8
#define PAIR_STAGE_14 9
#define PAIR_STAGE_15 9
#define PAIR_STAGE_16 9
#define PAIR_STAGE_17 9
#define PAIR_STAGE_18 10
#define PAIR_STAGE_19 10
#define PAIR_STAGE_20 10
#define PAIR_STAGE_21 10
#define PAIR_STAGE_22 11
#define PAIR_STAGE_23 11
#define PAIR_STAGE_24 11
#define PAIR_STAGE_25 11
#define LANE_PAIR_STAGE(p) @stage(PAIR_STAGE_##p)
#else
#define LANE_PAIR_STAGE(p)
#endif

/* The pairs' declarations and their tables, expanded in P4ReduceIngress itself
 * (VALUE_AGGREGATION_DECLARATIONS, applied by VALUE_AGGREGATION_APPLY after the passes'
 * branches, p4reduce.p4).
 *
 * One step per table, as SwitchML's Processor does: bf-p4c allows one stateful ALU
 * operation per action, so each pair has its own actions and its own (constant) table
 * choosing among them. The first contributor's step (overwrite) and a later one's (add) are
 * two steps of the same body: a Tofino ALU reads at most two PHV fields, here the pair's
 * two lanes, so the table chooses the step instead of the step reading meta.first.
 *
 * Each pair's table runs in every pass: a first pass's contribution (lane_op CONTRIBUTE)
 * takes its step from the bitmap's answer, a read-out pass (READ_LOW) reads the low lanes,
 * and in the lane-pass build (Tofino 1's test build) the lane pass runs the step its first
 * pass chose (FIRST, ADD, READ_HIGH). */
#if P4REDUCE_LANE_PASS
#define PAIR_ENTRIES(p)                                                        \
            (LANE_OP_FIRST, _, _, _, _): first_values_##p();                   \
            (LANE_OP_ADD, _, _, _, _): add_values_##p();                       \
            (LANE_OP_READ_HIGH, _, _, _, _): read_high_values_##p();
#else
#define PAIR_ENTRIES(p)                                                        \
            CONTRIBUTION_ENTRIES(LANE_OP_CONTRIBUTE, read_high_values_##p,     \
                                 first_values_##p, add_values_##p)
#endif

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
        key = { CONTRIBUTION_KEY }                                             \
        actions = { first_values_##p; add_values_##p; read_high_values_##p;    \
                    read_low_values_##p; NoAction; }                           \
        const entries = {                                                      \
            PAIR_ENTRIES(p)                                                    \
            STORE_ENTRY(first_values_##p)                                      \
            (LANE_OP_READ_LOW, _, _, _, _): read_low_values_##p();             \
        }                                                                      \
        const default_action = NoAction();                                     \
        size = 40;                                                             \
    }
#define VALUE_AGGREGATION_DECLARATIONS TNA_LANE_PAIRS(LANE_PAIR_STEPS)
#define LANE_PAIR_APPLY(p, l, h) pair_##p.apply();
#define VALUE_AGGREGATION_APPLY TNA_LANE_PAIRS(LANE_PAIR_APPLY)

/* An admitted contribution's lane_op (p4reduce.p4 applies it in the contribution branch,
 * beside the slot epoch step: it reads only the message type): the next key's, the
 * fingerprint range's and the pairs' tables then choose the step from the bitmap's answer.
 * Every other first pass keeps lane_op NONE, which no entry of those tables matches. */
control LaneOp(inout headers_t hdr, inout metadata_t meta) {
    action contribute() {
        meta.lane_op = LANE_OP_CONTRIBUTE;
    }
    action announce() {
        meta.lane_op = LANE_OP_ANNOUNCE;
    }
    /* a table, not an if (Tofino 1 places every table applied after an if later) */
    table lane_op {
        key = { hdr.p4r.msg_type: exact @name("msg_type"); }
        actions = { contribute; announce; NoAction; }
        const entries = {
            MSG_DATA: contribute();
            MSG_SKIP: contribute();
            MSG_ANNOUNCE: announce();
        }
        const default_action = NoAction();
        size = 3;
    }

    apply {
        lane_op.apply();
    }
}

/* A SKIP contributes zeros: its lanes are made valid and zero in the contribution branch,
 * so that as a round's first contribution it stores zeros and as a duplicate carries the
 * round's high sums. */
control SkipValues(inout headers_t hdr, inout metadata_t meta) {
    action zero_values() {
        hdr.values_0.setValid();
        hdr.values_1.setValid();
#define LANE_ZERO(p, l, h) hdr.values_0.v##l = 0; hdr.values_1.v##h = 0;
        TNA_LANE_PAIRS(LANE_ZERO)
    }
    table skip_values {
        key = { hdr.p4r.msg_type: exact @name("msg_type"); }
        actions = { zero_values; NoAction; }
        const entries = { MSG_SKIP: zero_values(); }
        const default_action = NoAction();
        size = 1;
    }

    apply {
        skip_values.apply();
    }
}

#if P4REDUCE_LANE_PASS
/* The lane pass (Tofino 1's test build): the first pass decides the step from the bitmap
 * and bridges it; the pairs run in the recirculated pass. */
control LanePassOp(inout headers_t hdr, inout metadata_t meta) {
    action set_lane_op(bit<3> op) {
        hdr.bridge.lane_op = op;
    }
    apply {
        if (hdr.p4r.msg_type != MSG_ANNOUNCE) {
            if (meta.seen != 0) {
                set_lane_op(LANE_OP_READ_HIGH);
            } else if (meta.in_round == 0) {
                /* stale: the lanes are left alone (lane_op stays NONE) */
            } else if (meta.first == 1) {
                set_lane_op(LANE_OP_FIRST);
            } else {
                set_lane_op(LANE_OP_ADD);
            }
        }
    }
}
#endif
#endif
