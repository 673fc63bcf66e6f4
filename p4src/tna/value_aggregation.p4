/* Value aggregation on TNA (../v1model/value_aggregation.p4 explains the protocol side).
 * Lanes come in pairs: one Register of pair_t per pair, 32 stateful ALUs for 64 lanes, as
 * SwitchML does; the steps are the shared bodies of ../common/bodies/value_aggregation.p4
 * (LANE_UPDATE, the same arithmetic the v1model program runs per lane). An ALU returns one
 * value: the contribution pass puts each pair's high sum into the packet, and a packet
 * that becomes a RESULT with values takes a second pass (`harvest`) that reads the low
 * halves. int32 overflow is not detected here (an ALU cannot return the sum and the
 * overflow bit of both lanes): see docs/tofino.md for what the TNA program does instead. */
#ifndef P4REDUCE_TNA_VALUE_AGGREGATION_P4
#define P4REDUCE_TNA_VALUE_AGGREGATION_P4
#define LANE_OP_NONE 2w0
#define LANE_OP_ADD 2w1
#define LANE_OP_READ_HIGH 2w2
#define LANE_OP_READ_LOW 2w3

control ValueAggregation(inout headers_t hdr, inout metadata_t meta, in bit<1> harvest) {
    /* What every pair does to this packet: one step per pair's table, as SwitchML's
     * Processor does. bf-p4c allows one stateful ALU operation per action, so each pair has
     * its own actions and its own (constant) table choosing among them. */
    bit<2> lane_op;

#define LANE_PAIR_STEPS(p, l, h)                                               \
    Register<pair_t, bit<32>>(SLOT_ENTRIES, {0, 0}) lanes_##p;                 \
    PAIR_ACTION(bit<32>, lanes_##p, add_##p,                                   \
                LANE_PAIR_ADD_BODY(hdr.values.v##l, hdr.values.v##h))          \
    PAIR_ACTION(bit<32>, lanes_##p, read_high_##p, LANE_PAIR_READ_BODY)        \
    PAIR_ACTION(bit<32>, lanes_##p, read_low_##p, LANE_PAIR_READ_LOW_BODY)     \
    action add_values_##p() {                                                  \
        hdr.values.v##h = add_##p.execute(meta.slot_index);                    \
    }                                                                          \
    action read_high_values_##p() {                                            \
        hdr.values.v##h = read_high_##p.execute(meta.slot_index);              \
    }                                                                          \
    action read_low_values_##p() {                                             \
        hdr.values.v##l = read_low_##p.execute(meta.slot_index);               \
    }                                                                          \
    table pair_##p {                                                           \
        key = { lane_op: exact; }                                              \
        actions = { add_values_##p; read_high_values_##p; read_low_values_##p; \
                    NoAction; }                                                \
        const entries = {                                                      \
            LANE_OP_ADD: add_values_##p();                                     \
            LANE_OP_READ_HIGH: read_high_values_##p();                         \
            LANE_OP_READ_LOW: read_low_values_##p();                           \
        }                                                                      \
        const default_action = NoAction();                                     \
        size = 4;                                                              \
    }
    FOR_EACH_LANE_PAIR(LANE_PAIR_STEPS)

    action zero_values() {
        hdr.values.setValid();
#define LANE_ZERO(i) hdr.values.v##i = 0;
        FOR_EACH_LANE(LANE_ZERO)
    }

    apply {
        meta.lane_overflow = 0;
        meta.round_overflow = 0;
        lane_op = LANE_OP_NONE;
        if (harvest == 1) {
            lane_op = LANE_OP_READ_LOW;
        } else if (meta.duplicate == 1) {
            if (hdr.p4r.msg_type != MSG_ANNOUNCE) {
                zero_values();
                lane_op = LANE_OP_READ_HIGH;
            }
        } else if (hdr.p4r.msg_type == MSG_DATA) {
            lane_op = LANE_OP_ADD;
        } else if (hdr.p4r.msg_type == MSG_SKIP) {
            if (meta.first == 1) {
                zero_values();
                lane_op = LANE_OP_ADD;
            } else if (meta.complete == 1) {
                zero_values();
                lane_op = LANE_OP_READ_HIGH;
            }
        }
#define LANE_PAIR_APPLY(p, l, h) pair_##p.apply();
        FOR_EACH_LANE_PAIR(LANE_PAIR_APPLY)
    }
}
#endif
