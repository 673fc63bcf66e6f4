/* p4reduce for TNA (Tofino, Tofino 2): the same protocol as ../v1model/p4reduce.p4, with
 * the same headers, constants and register-action bodies (../common/) and the same table,
 * action, counter and match-field names, so the controller drives either unchanged.
 * docs/tofino.md maps every control to its v1model counterpart and lists the differences. */
#include "arch.p4"
#include "bridge.p4"
#include "values.p4"
#include "../common/headers.p4"
#include "../common/bodies/contributor_bitmap.p4"
#include "../common/bodies/value_aggregation.p4"
#include "../common/bodies/next_block.p4"
#include "../common/bodies/fingerprint.p4"
#include "../common/bodies/drop_simulator.p4"
#include "../common/bodies/read.p4"
#include "register_step.p4"
#include "parser.p4"
#include "validation.p4"
#include "slot_index.p4"
#include "../common/admission.p4"
#include "drop_simulator.p4"
#include "contributor_bitmap.p4"
#include "value_aggregation.p4"
#include "fingerprint.p4"
#include "next_block.p4"
#include "round_winner.p4"
#include "rank_next.p4"
#include "uplink.p4"
#include "result.p4"
#include "../common/result_destination.p4"
#include "../common/identity.p4"
#include "../common/forwarding.p4"

/* Headers never valid together, which bf-p4c cannot prove because ValueAggregation and
 * Result validate values and round_status in actions: said here, so that they share PHV
 * containers (the 64 value lanes alone take 2048 of Tofino 1's 4096 bits of PHV). An ARP
 * frame carries no p4reduce header; a packet carries values, or a fingerprint (ANNOUNCE),
 * or a round status (STATUS: make_status invalidates the other two). */
@pa_mutually_exclusive("ingress", "hdr.arp", "hdr.values_0")
@pa_mutually_exclusive("ingress", "hdr.arp", "hdr.values_1")
@pa_mutually_exclusive("ingress", "hdr.arp", "hdr.fingerprint")
@pa_mutually_exclusive("ingress", "hdr.arp", "hdr.round_status")
@pa_mutually_exclusive("ingress", "hdr.arp", "hdr.ipv4")
@pa_mutually_exclusive("ingress", "hdr.arp", "hdr.udp")
@pa_mutually_exclusive("ingress", "hdr.arp", "hdr.p4r")
#if __TARGET_TOFINO__ == 2
/* (Tofino 2's 64 lanes need the room. Tofino 1's fewer lanes leave it, and there a value
 * lane sharing a container with the fingerprint or the round status would tie its pair's
 * table to the stages after the steps that write those.) */
@pa_mutually_exclusive("ingress", "hdr.values_0", "hdr.fingerprint")
@pa_mutually_exclusive("ingress", "hdr.values_0", "hdr.round_status")
@pa_mutually_exclusive("ingress", "hdr.values_1", "hdr.fingerprint")
@pa_mutually_exclusive("ingress", "hdr.values_1", "hdr.round_status")
#endif
@pa_mutually_exclusive("ingress", "hdr.fingerprint", "hdr.round_status")
/* What ingress bridges to egress lives in the bridge header only: bf-p4c aliases a field
 * copied into a header in the action that validates it by itself, but not in a header the
 * parser may extract too (the harvest pass reads this one back), so said here. */
@pa_alias("ingress", "meta.dest_rank", "hdr.bridge.dest_rank")
@pa_alias("ingress", "meta.job_index", "hdr.bridge.job_index")
@pa_alias("ingress", "meta.mcast_grp", "hdr.bridge.mcast_grp")
@pa_alias("ingress", "meta.slot_index_16", "hdr.bridge.slot_index")
#if P4REDUCE_DROP_SIMULATOR
@pa_alias("ingress", "meta.sim_egress_threshold", "hdr.bridge.sim_egress_threshold")
@pa_alias("ingress", "meta.sim_seed", "hdr.bridge.sim_seed")
@pa_alias("ingress", "meta.sim_sequence", "hdr.bridge.sim_sequence")
#endif
/* The job id apart from the first 16 bits of the p4reduce header, which the header-writing
 * actions rewrite but for slot_version (a write must leave one contiguous part of a
 * container alone). */
@pa_container_size("ingress", "hdr.p4r.job", 16)
/* lane_op alone in its container: bf-p4c packed it with bridge fields, which tied the
 * contribution's lane_op (LaneOp) to the stage after bridge_to_egress and every table
 * keyed by it (the next key, the fingerprint range, the pairs) one stage later */
@pa_solitary("ingress", "meta.lane_op")
#if P4REDUCE_WINNER_CHECK
/* The winner check's operand and answer in 32-bit containers (left to itself, bf-p4c took
 * four 8-bit containers for the probe, which the lanes need). */
@pa_container_size("ingress", "meta.winner_probe", 32)
@pa_container_size("ingress", "meta.joining_bit", 32)
/* ... and in the containers of two fields the bitmap's answer fills later in the pass: the
 * probe and the check's answer are dead once the bitmap step has run (the read-out pass
 * reads neither seen nor complete_diff), so they share PHV. */
@pa_mutually_exclusive("ingress", "meta.winner_probe", "meta.seen")
@pa_mutually_exclusive("ingress", "meta.joining_bit", "meta.complete_diff")
#endif
/* Value lanes in containers chosen here: left to itself, bf-p4c (9.13.4) spreads lanes over
 * 8-bit containers and then has none left for the 8-bit fields. Tofino 1 gives ingress at
 * most 48 of its 64 32-bit containers (egress needs a group of 16), so values_0's lanes take
 * 32-bit containers and values_1's two 16-bit ones each (Tofino 1's 24 of them take 48 of
 * the 16-bit containers); Tofino 2's 64 lanes put v32..v39 in four 8-bit containers each
 * and v40..v63 in 16-bit ones (what was left). */
#define P4REDUCE_STR(x) #x
#define LANE_0_IN_32(p, l, h) @pa_container_size("ingress", P4REDUCE_STR(hdr.values_0.v##l), 32)
#define LANE_1_IN(h, bits) @pa_container_size("ingress", P4REDUCE_STR(hdr.values_1.v##h), bits)
TNA_LANE_PAIRS(LANE_0_IN_32)
#if P4REDUCE_SILENT_ROUNDS
/* Silent rounds' keys and minimum tree (rank_next.p4) need normal 32-bit containers, which
 * the lanes fill: six of values_0's lanes go to mocha containers, which a stateful ALU's
 * output, a constant and the deparser use whole, as the lanes are used. */
@pa_container_type("ingress", "hdr.values_0.v26", "mocha")
@pa_container_type("ingress", "hdr.values_0.v27", "mocha")
@pa_container_type("ingress", "hdr.values_0.v28", "mocha")
@pa_container_type("ingress", "hdr.values_0.v29", "mocha")
@pa_container_type("ingress", "hdr.values_0.v30", "mocha")
@pa_container_type("ingress", "hdr.values_0.v31", "mocha")
#endif
#if __TARGET_TOFINO__ == 2
LANE_1_IN(32, 8) LANE_1_IN(33, 8) LANE_1_IN(34, 8) LANE_1_IN(35, 8)
LANE_1_IN(36, 8) LANE_1_IN(37, 8) LANE_1_IN(38, 8) LANE_1_IN(39, 8)
LANE_1_IN(40, 16) LANE_1_IN(41, 16) LANE_1_IN(42, 16) LANE_1_IN(43, 16)
LANE_1_IN(44, 16) LANE_1_IN(45, 16) LANE_1_IN(46, 16) LANE_1_IN(47, 16)
LANE_1_IN(48, 16) LANE_1_IN(49, 16) LANE_1_IN(50, 16) LANE_1_IN(51, 16)
LANE_1_IN(52, 16) LANE_1_IN(53, 16) LANE_1_IN(54, 16) LANE_1_IN(55, 16)
LANE_1_IN(56, 16) LANE_1_IN(57, 16) LANE_1_IN(58, 16) LANE_1_IN(59, 16)
LANE_1_IN(60, 16) LANE_1_IN(61, 16) LANE_1_IN(62, 16) LANE_1_IN(63, 16)
#else
#define LANE_1_IN_16(p, l, h) LANE_1_IN(h, 16)
TNA_LANE_PAIRS(LANE_1_IN_16)
#endif
control P4ReduceIngress(inout headers_t hdr, inout metadata_t meta,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<32>, bit<32>>(DROP_REASONS, CounterType_t.PACKETS) drops;

    SwitchIdentity() identity;
    Validation() validation;
    Admission() admission;
    DropSimulator() drop_simulator;
    RankMasks() rank_masks;
    ContributorBitmap() contributor_bitmap;
    ContributionFlags() contribution_flags;
    VALUE_AGGREGATION_DECLARATIONS
    FINGERPRINT_DECLARATIONS
#if P4REDUCE_SILENT_ROUNDS
    SILENT_DECLARATIONS
    bit<4> key_op;          /* silent_step ++ lane_op: the next key's step (next_block.p4) */
    Hash<bit<4>>(HashAlgorithm_t.IDENTITY) key_op_hash;
    action take_key_op() {
        key_op = key_op_hash.get({ silent_step, meta.lane_op });
    }
#endif
    NEXT_KEY_DECLARATIONS
    LaneOp() lane_op;
    SkipValues() skip_values;
#if P4REDUCE_LANE_PASS
    LanePassOp() lane_pass_op;
#endif
    NextBlock() next_block;
    Result() result;
    Forwarding() forwarding;
#if P4REDUCE_LEAF_ROLE
    Uplink() uplink;
    FromUplink() from_uplink;
    LEAF_ROLE_DECLARATIONS
    bit<1> spine_result;     /* a first pass: the spine's RESULT or STATUS, from the uplink */
#endif
#if P4REDUCE_WINNER_CHECK
    WinnerProbe() winner_probe;
    ReadOut() read_out;

    /* The winner a new contribution must carry (round_winner.p4): checked by a first pass
     * before the bitmap, stored by a read-out pass -- the two branches of the if below, so
     * one stateful ALU runs both. */
#if P4REDUCE_SILENT_ROUNDS
    /* with silent rounds a cell is a pair: lo the winner as below, hi the expected ranks of
     * the round it names (rank_next.p4) */
    Register<pair_t, bit<16>>(POOL_SLOTS, {0, 0}) round_winner;
    PAIR_ACTION(bit<16>, round_winner, winner_check, WINNER_CHECK_PAIR_BODY)
    PAIR_ACTION(bit<16>, round_winner, silent_check, SILENT_CHECK_BODY)
    PAIR_ACTION(bit<16>, round_winner, winner_store, WINNER_STORE_PAIR_BODY)
    bit<1> silent_checked;
    action check_silent() {
        meta.joining_bit = silent_check.execute(meta.pool_slot_16);
        silent_checked = 1;
    }
    /* the check's answer (the expected ranks, or 0) as the bitmap step's two inputs: the
     * sender's bit if expected, and the expected ranks of the job (others_mask: the job's
     * ranks without the sender, RankMasks) without the sender */
    action round_expected() {
        meta.others_mask = meta.joining_bit & meta.others_mask;
        meta.joining_bit = meta.joining_bit & meta.rank_bit;
    }
#define SILENT_CHECK_ACTION_NAME check_silent;
#define MODE_KEY meta.round_mode: ternary @name("round_mode");
#define MODE(m) , m
#else
    Register<bit<32>, bit<16>>(POOL_SLOTS, 0) round_winner;
    REGISTER_ACTION(bit<32>, bit<16>, round_winner, winner_check, WINNER_CHECK_BODY)
    REGISTER_ACTION(bit<32>, bit<16>, round_winner, winner_store, WINNER_STORE_BODY)
#define SILENT_CHECK_ACTION_NAME
#define MODE_KEY
#define MODE(m)
#endif
    /* an ANNOUNCE not CONTINUED is in the job's first round on the slot, which has no
     * earlier round to match (version 1: stale, below) */
    action join_first_round() {
        meta.joining_bit = meta.rank_bit;
    }
    action check_winner() {
        meta.joining_bit = winner_check.execute(meta.pool_slot_16);
    }
#if P4REDUCE_LEAF_ROLE
    /* the spine's RESULT or STATUS joins no round: its bitmap step only reads (uplink.p4) */
    action join_none() {
        meta.joining_bit = 0;
    }
#define JOIN_NONE_ACTION join_none;
#define JOIN_NONE_ENTRIES (_, MSG_RESULT MODE(_)): join_none(); (_, MSG_STATUS MODE(_)): join_none();
#define WINNER_CHECK_SIZE 5
#else
#define WINNER_CHECK_SIZE 3
#define JOIN_NONE_ACTION
#define JOIN_NONE_ENTRIES
#endif
    action store_winner() {
        winner_store.execute(meta.pool_slot_16);
    }
    /* the check (first pass) and the store (read-out pass) as tables of one stage
     * (WINNER_STAGE): one stateful ALU runs both */
    WINNER_STAGE
    table winner_check_step {
        key = { hdr.p4r.flags[3:3]: ternary @name("continued");
                hdr.p4r.msg_type: ternary @name("msg_type"); MODE_KEY }
        actions = { join_first_round; check_winner; SILENT_CHECK_ACTION_NAME
                    JOIN_NONE_ACTION NoAction; }
        const entries = {
            (0, MSG_ANNOUNCE MODE(_)): join_first_round();
            JOIN_NONE_ENTRIES
#if P4REDUCE_SILENT_ROUNDS
            (_, _, ROUND_MODE_SILENT): check_silent();
#endif
            (_, _ MODE(_)): check_winner();
        }
        const default_action = NoAction();
        size = WINNER_CHECK_SIZE;
    }
    WINNER_STAGE
    table winner_store_step {
#if P4REDUCE_LEAF_ROLE
        key = { hdr.bridge.lane_op[2:2]: exact @name("read_out");
                hdr.bridge.up: exact @name("up"); }
        actions = { store_winner; NoAction; }
        /* a leaf's partial stores none: the spine's RESULT will (uplink.p4) */
        const entries = { (1, 0): store_winner(); }
#else
        key = { hdr.bridge.lane_op[2:2]: exact @name("read_out"); }
        actions = { store_winner; NoAction; }
        const entries = { 1: store_winner(); }
#endif
        const default_action = NoAction();
        size = 1;
    }
#endif

    action drop_counted(bit<32> reason) {
        drops.count(reason);
        ig_dprsr_md.drop_ctl = 1;
    }

    /* The bridge header is made valid where the first pass starts: the fields that egress
     * and the later passes read are aliased to the metadata that holds them (@pa_alias
     * above), so they are filled where they are computed, and a pass that sends the packet
     * on only sets its flags (harvest, lane_op, deliver). The ingress port is copied in
     * an action of its own (an ALU writes a container from at most two sources). */
    action bridge_to_egress() {
        hdr.bridge.setValid();
        hdr.bridge.harvest = 0;
        hdr.bridge.pad = 0;
        hdr.bridge.up = 0;
        hdr.bridge.pad2 = 0;
        hdr.bridge.pad3 = 0;
#if P4REDUCE_SILENT_ROUNDS
        hdr.bridge.expected = 0;
#endif
        hdr.bridge.continued = 0;
        hdr.bridge.deliver = 0;
        hdr.bridge.lane_op = LANE_OP_NONE;      /* Result sets it for a read-out pass */
    }
    action bridge_fields() {
        hdr.bridge.ingress_port = ig_intr_md.ingress_port;
    }
    /* The 1-bit flags share a byte of the bridge; copied from three metadata containers
     * they would need three sources, so a constant table turns them into action data
     * (one source). */
    action set_bridge_flags(bit<1> to_worker, bit<1> multicast, bit<1> sim_random) {
        hdr.bridge.to_worker = to_worker;
        hdr.bridge.multicast = multicast;
        hdr.bridge.sim_random = sim_random;
    }
    table bridge_flags {
        key = { meta.to_worker: exact; meta.multicast: exact; meta.sim_random: exact; }
        actions = { set_bridge_flags; }
        const entries = {
            (0, 0, 0): set_bridge_flags(0, 0, 0); (0, 0, 1): set_bridge_flags(0, 0, 1);
            (0, 1, 0): set_bridge_flags(0, 1, 0); (0, 1, 1): set_bridge_flags(0, 1, 1);
            (1, 0, 0): set_bridge_flags(1, 0, 0); (1, 0, 1): set_bridge_flags(1, 0, 1);
            (1, 1, 0): set_bridge_flags(1, 1, 0); (1, 1, 1): set_bridge_flags(1, 1, 1);
        }
        size = 8;
    }
    /* the harvest pass: the bridge header it arrived with goes on to egress as it is, but
     * for the flag that sent it here */
    action end_harvest() {
        hdr.bridge.harvest = 0;
    }
    action to_read_low() {
        hdr.bridge.lane_op = LANE_OP_READ_LOW;
        ig_tm_md.ucast_egress_port = HARVEST_PORT;
    }
    action harvest_multicast() {
        end_harvest();
        ig_tm_md.mcast_grp_a = hdr.bridge.mcast_grp;
    }
    action harvest_unicast() {
        end_harvest();
        ig_tm_md.ucast_egress_port = hdr.bridge.ingress_port;
    }
    /* the read-out pass's way out: one table, not an if and two actions (Tofino 1's
     * logical tables in the stages after the pairs: docs/tofino.md, "Fit") */
    table delivery {
        key = { hdr.bridge.multicast: exact @name("multicast"); }
        actions = { harvest_multicast; harvest_unicast; }
        const entries = { 1: harvest_multicast(); 0: harvest_unicast(); }
        size = 2;
    }

    /* a recirculated pass: what its pairs and fingerprint range do */
    action take_lane_op() {
        meta.lane_op = hdr.bridge.lane_op;
    }
    /* The read-out pass of an announce round's RESULT (fingerprint.p4): it arrives with the
     * sender's own fingerprint as minimum and the round's maximum, and leaves with the
     * round's minimum too. range_before: the two as it arrived (not 0: the range differs
     * already, and ReadOut stored END_OF_STREAM as the winner); range_after: the round's
     * range. */
    bit<32> range_before;
    bit<32> range_after;
    bit<1> read_out_again;
    action compare_range_before() {
        range_before = hdr.fingerprint.fingerprint_min ^ hdr.fingerprint.fingerprint_max;
    }
    action compare_range_after() {
        range_after = hdr.fingerprint.fingerprint_min ^ hdr.fingerprint.fingerprint_max;
    }
    action end_of_stream() {
        hdr.p4r.next_block = END_OF_STREAM;
        hdr.p4r.next_exponent = 0;
    }
    /* the RESULT goes round once more, its harvest flag still set: that pass stores
     * END_OF_STREAM as the winner (round_winner.p4) */
    action to_read_out_again() {
        ig_tm_md.ucast_egress_port = HARVEST_PORT;
    }

    /* ValueAggregation and Fingerprint are applied once, for both passes: a control applied
     * twice is inlined with a copy of every header in and out of each call (the frontend
     * cannot substitute the arguments of a control it inlines twice), which bf-p4c then has
     * to place in PHV and copy in actions. */
    bit<1> harvest_pass;
    bit<1> reply;           /* a first pass that Result answers */
    bit<1> contribution;    /* ... after the epoch and bitmap steps */
    /* "addressed to the switch": a gateway cannot compare two 32-bit fields, so their xor */
    bit<32> dst_diff;
    action compare_dst() {
        dst_diff = hdr.ipv4.dst_addr ^ meta.switch_ip;
    }

/* The end of a recirculated pass: the read-out pass delivers the result (after storing its
 * winner); the lane pass (Tofino 1's test build) sends a RESULT on to its read-out pass and
 * ends a contribution. */
#define P4REDUCE_DELIVER                                                       \
    if (hdr.bridge.lane_op[2:2] == 1) {        /* READ_LOW or READ_OUT */      \
        delivery.apply();                                                      \
    } else if (hdr.bridge.deliver == 1) {                                      \
        to_read_low();                                                         \
    } else {                                                                   \
        ig_dprsr_md.drop_ctl = 1;                                              \
    }
/* The end of a first pass: the flags of the bridge header. */
#define P4REDUCE_BRIDGE_OUT                                                    \
    bridge_flags.apply();

    /* Three phases, so that each lane pair, the next key and the fingerprint range have one
     * table for every pass, in the stages right after the bitmap step: (A) what decides a
     * step -- a recirculated pass's lane_op from the bridge and its winner store, or a first
     * pass's lookups, checks and, for a contribution, the slot epoch and bitmap steps; (B)
     * the steps, each one table keyed by lane_op and the bitmap's answer (a table applied
     * in two places would need two tables, and Tofino 1 has 16 per stage); (C) what the
     * packet becomes. Tofino 1 chains tables by next-table pointers: a table after an if
     * waits for the tables inside it, so (A) holds only what (B) reads. The lane-pass build
     * (Tofino 1's test build) runs its pairs in (A)'s recirculated branch instead, beside
     * the first pass's stages. */
    apply {
        meta.to_worker = 0;
        meta.multicast = 0;
        meta.state_lost = 0;
        meta.parser_error = 0;
        meta.stale = 0;
        meta.lane_op = LANE_OP_NONE;
        harvest_pass = 0;
#if P4REDUCE_SILENT_ROUNDS
        silent_step = 0;
        silent_checked = 0;
#endif
        reply = 0;
        contribution = 0;
        read_out_again = 0;
        if (ig_prsr_md.parser_err != 0) {
            meta.parser_error = 1;
        }
        identity.apply(hdr, meta);
#if P4REDUCE_LEAF_ROLE
        spine_result = 0;
        uplink.apply(hdr, meta);      /* every pass: the read-out pass addresses the partial */
#endif
        /* (A) */
        if (hdr.bridge.isValid()) {
            /* a recirculated pass (the bridge header came back with the packet): the
             * read-out pass (the winner, the low lanes or the fingerprint minimum), or the
             * lane pass (Tofino 1's test build) */
            harvest_pass = 1;
            take_lane_op();
            compare_range_before();
#if P4REDUCE_WINNER_CHECK
            if (hdr.bridge.lane_op[2:2] == 1) {
                /* the read-out pass: the round's winner is stored before the RESULT
                 * leaves (round_winner.p4) */
                read_out.apply(hdr, meta, range_before);
                winner_store_step.apply();
            }
#endif
#if P4REDUCE_LANE_PASS
            /* the lane pass's and the read-out pass's pairs (Tofino 1's test build): in this
             * branch, exclusive with the first pass's, so they share its stages */
            VALUE_AGGREGATION_APPLY
#endif
        } else {
            /* Everything that only reads the packet runs first, for every packet (the
             * admission and drop-simulator lookups, the validation rules, the address
             * comparison); the decisions read their results. */
            bridge_to_egress();
            bridge_fields();
            compare_dst();
            /* a SKIP's zero lanes, for every SKIP: a worker's SKIP carries none (anything
             * else is malformed), and the pairs read them two stages after the bitmap */
            skip_values.apply(hdr, meta);
            meta.epoch_lost = hdr.p4r.epoch | EPOCH_LOST;
#if P4REDUCE_WINNER_CHECK
            winner_probe.apply(hdr, meta);
#endif
            validation.apply(hdr, meta);
#if P4REDUCE_LEAF_ROLE
            from_uplink.apply(hdr, meta, ig_intr_md.ingress_port);
            spine_result = meta.spine_result;
#endif
            admission.apply(hdr, meta, ig_intr_md, dst_diff);
            rank_masks.apply(hdr, meta);
            drop_simulator.apply(hdr, meta, dst_diff);
            /* the winner check only reads its cell: it runs for every p4reduce packet, so
             * that its answer is ready for the bitmap step */
#if P4REDUCE_WINNER_CHECK
            if (hdr.p4r.isValid()) {
                winner_check_step.apply();
#if P4REDUCE_SILENT_ROUNDS
                if (silent_checked == 1) {
                    round_expected();
                }
#endif
            }
#endif
            if (meta.parser_error == 0 && meta.checksum_error == 0 && hdr.ipv4.isValid()
                    && hdr.p4r.isValid() && dst_diff == 0 && meta.malformed == 0
                    && meta.admitted == 1 && meta.encoding_differs == 0
                    && meta.slot_count != 0) {
#if P4REDUCE_DROP_SIMULATOR
                if (meta.sim_keep != 0) {
#endif
                    if (hdr.p4r.slot_version == 1 && hdr.p4r.flags[3:3] == 0
                            && hdr.p4r.msg_type == MSG_ANNOUNCE) {
                        /* an ANNOUNCE not CONTINUED: its sender is in the job's first
                         * round on the slot, which is version 0 -- a stray
                         * (docs/protocol.md section 8) */
                        meta.stale = 1;
                        reply = 1;
                    } else {
                        /* a contribution: its lane_op (from the message type), then the
                         * epoch and bitmap steps */
                        lane_op.apply(hdr, meta);
                        next_block.apply(hdr, meta);
#if P4REDUCE_LEAF_ROLE
                        /* the spine's RESULT: stored by a complete round (uplink.p4);
                         * anything else from the uplink only reaches Result, and from
                         * elsewhere is malformed (below). Its bitmap step only reads. */
                        if (spine_result == 1 && hdr.p4r.msg_type == MSG_RESULT
                                && hdr.p4r.flags[4:4] == 0) {
                            store_result();
                        }
                        contributor_bitmap.apply(hdr, meta);
                        if (meta.downlink == 0) {
                            contribution = 1;
                        }
#else
                        contributor_bitmap.apply(hdr, meta);
                        contribution = 1;
#endif
#if P4REDUCE_SILENT_ROUNDS
                        SILENT_KEYS_APPLY
#endif
                        reply = 1;
                    }
#if P4REDUCE_DROP_SIMULATOR
                }
#endif
            }
        }
        /* (B) the next key, the fingerprint range and the pairs, from the bitmap's answer in
         * the stage after it (a first pass), or the read-out pass's reads */
#if P4REDUCE_SILENT_ROUNDS
        SILENT_WINNER_APPLY
        take_key_op();
#endif
        next_key_step.apply();
        range_step.apply();
#if !P4REDUCE_LANE_PASS
        VALUE_AGGREGATION_APPLY
#endif
        /* (C) */
        if (harvest_pass == 1) {
#if P4REDUCE_LEAF_ROLE
            if (hdr.bridge.up == 1) {
                /* a leaf's completed round, or a cached one whose result it does not
                 * hold: the partial goes up (uplink.p4) */
                send_up();
                partial_header.apply();
            } else {
#endif
            if (hdr.fingerprint.isValid()) {
                /* an announce round's RESULT on its read-out pass, its range now whole */
                compare_range_after();
                if (range_after != 0) {
#if P4REDUCE_WINNER_CHECK
                    if (range_before == 0) {
                        /* the winner stored this pass was the RESULT's next block: the
                         * range differs, so END_OF_STREAM must be, in one more pass */
                        end_of_stream();
                        read_out_again = 1;
                    }
#else
                    end_of_stream();
#endif
                }
            }
            if (read_out_again == 1) {
                to_read_out_again();
            } else {
                P4REDUCE_DELIVER
            }
#if P4REDUCE_LEAF_ROLE
            }
#endif
        } else {
            /* one if-else chain, so that bf-p4c sees forwarding and the p4reduce path as
             * exclusive (they write the same intrinsic metadata) */
            if (meta.parser_error == 1 || meta.checksum_error == 1) {
                drop_counted(DROP_MALFORMED);
#if P4REDUCE_LEAF_ROLE
            } else if (reply == 1 && meta.downlink == 1 && spine_result == 0) {
                drop_counted(DROP_MALFORMED);   /* only the spine sends these */
#endif
            } else if (reply == 1) {
                if (contribution == 1) {
                    contribution_flags.apply(hdr, meta);
#if P4REDUCE_LANE_PASS
                    if (meta.state_lost == 0) {
                        lane_pass_op.apply(hdr, meta);
                    }
#endif
                }
                result.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
            } else if (hdr.ipv4.isValid() && hdr.p4r.isValid() && dst_diff == 0
                       && meta.malformed == 0) {
                if (meta.admitted == 0) {
                    drop_counted(DROP_UNADMITTED);
                } else {
                    /* counted per job by admission (encoding, slot range) or by the drop
                     * simulator */
                    ig_dprsr_md.drop_ctl = 1;
                }
            } else if (hdr.ipv4.isValid() && dst_diff == 0 && meta.malformed == 1) {
                drop_counted(DROP_MALFORMED);
            } else {
                forwarding.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
            }
            P4REDUCE_BRIDGE_OUT
        }
    }
}

/* Tofino 1 gives PHV containers to ingress or egress by groups of 16: egress fields in
 * 16-bit containers leave every 8-bit group to ingress, where the value lanes leave the
 * least room. */
@pa_container_size("egress", "hdr.bridge.dest_rank", 16)
@pa_container_size("egress", "hdr.bridge.to_worker", 16)
@pa_container_size("egress", "hdr.bridge.multicast", 16)
@pa_container_size("egress", "hdr.bridge.sim_random", 16)
@pa_container_size("egress", "hdr.bridge.harvest", 16)
@pa_container_size("egress", "hdr.p4r.rank", 16)
@pa_container_size("egress", "eg_intr_md.egress_rid", 16)
control P4ReduceEgress(inout headers_t hdr, inout metadata_t meta,
                       in egress_intrinsic_metadata_t eg_intr_md,
                       in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                       inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                       inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    ResultDestination() result_destination;
    DropSimulatorEgress() drop_simulator_egress;

    action strip_bridge() {
        hdr.bridge.setInvalid();
    }

    apply {
        if (hdr.bridge.harvest == 1) {
            /* on its way to the second pass: nothing to address yet; the bridge header
             * goes with it (the harvest pass reads it) */
        } else {
            if (hdr.bridge.to_worker == 1) {
                result_destination.apply(hdr, meta, eg_intr_md, eg_dprsr_md);
                drop_simulator_egress.apply(hdr, eg_intr_md, eg_dprsr_md);
            } else if (hdr.bridge.multicast == 1) {
                if (eg_intr_md.egress_port == hdr.bridge.ingress_port) {
                    eg_dprsr_md.drop_ctl = 1;      /* a flooded frame does not go back */
                }
            }   /* a unicast one may: an ARP reply leaves by its request's port */
            strip_bridge();
        }
    }
}

Pipeline(P4ReduceIngressParser(),
         P4ReduceIngress(),
         P4ReduceIngressDeparser(),
         P4ReduceEgressParser(),
         P4ReduceEgress(),
         P4ReduceEgressDeparser()) pipe;

Switch(pipe) main;
