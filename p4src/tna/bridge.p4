/* What ingress hands to egress on TNA (v1model carries user metadata to egress itself):
 * the fields ResultDestination and the egress drop simulator read, and what the harvest
 * pass needs. Emitted first by the ingress deparser and parsed first by the egress parser;
 * a packet on its way to the harvest pass keeps it (the egress deparser emits it again) and
 * the ingress parser of the harvest port reads it back: one header serves both hand-offs,
 * so ingress holds these fields once (docs/tofino.md, "PHV"). Never sent on a wire. */
#ifndef P4REDUCE_TNA_BRIDGE_P4
#define P4REDUCE_TNA_BRIDGE_P4
/* The drop simulator (drop_simulator.p4) is a compile-time option on TNA: the production
 * build (p4src/build/tofino/, tofino2/) leaves it out, which frees its sequence ALU, its
 * hash and the stages before the slot epoch that its verdict took; the test build
 * (p4src/build/tofino-test/, tofino2-test/: `compile.py --target T --drop-simulator`)
 * has it. */
#ifndef P4REDUCE_DROP_SIMULATOR
#define P4REDUCE_DROP_SIMULATOR 0
#endif
/* Silent rounds (rank_next.p4, docs/tofino.md "Silent rounds on TNA"): a job's round mode
 * is in its admission entry on every build; the silent path -- one rank_next register and
 * stateful ALU per rank, the minimum of their keys as a tree, the expected ranks -- is built
 * in Tofino 2's production build, for jobs of at most SILENT_RANKS ranks (Tofino 1 has no
 * stage left; Tofino 2's test build keeps the drop simulator's PHV and stages). */
#ifndef P4REDUCE_SILENT_ROUNDS
#if __TARGET_TOFINO__ == 2 && !P4REDUCE_DROP_SIMULATOR
#define P4REDUCE_SILENT_ROUNDS 1
#else
#define P4REDUCE_SILENT_ROUNDS 0
#endif
#endif
#ifndef SILENT_RANKS
#define SILENT_RANKS 8
#endif
header bridge_t {
    /* Laid out for bridge_to_egress, which copies these from metadata in one action: a
     * Tofino ALU writes a container from at most two sources (one if a constant is among
     * them), so no cast (its zero bits are a constant), and the 1-bit flags share one byte
     * that a constant table fills from one container of metadata flags. */
    bit<1>  to_worker;
    bit<1>  multicast;
    bit<1>  sim_random;
    bit<1>  up;                 /* leaf role: a leaf's own RESULT, its partial: the read-out
                                   pass sends it up by the uplink (uplink.p4) */
    bit<4>  pad;
    bit<8>  dest_rank;          /* unicast replies: the sender; multicast: from the rid */
    bit<8>  job_index;
    bit<7>  pad2;
    bit<9>  ingress_port;       /* a flooded copy is not sent back out of it; the harvest
                                   pass unicasts a cached result back out of it */
    bit<16> mcast_grp;          /* the harvest pass multicasts a completed round here */
    bit<16> slot_index;         /* the lane registers' index (pool_slot * 2 + slot_version) */
    bit<1>  continued;          /* leaf role: the first pass's FLAG_CONTINUED, which the
                                   partial the read-out pass sends up carries */
    bit<2>  pad3;
    bit<1>  harvest;            /* the packet goes to a recirculated pass (the harvest port);
                                   beside lane_op and deliver, which the same actions write */
    bit<1>  deliver;            /* LANE_PASS: after the lane pass, the harvest pass and out */
    bit<3>  lane_op;            /* what the pairs and the fingerprint range do in the
                                   recirculated pass (value_aggregation.p4): READ_LOW or
                                   READ_OUT in the read-out pass, which stores the round's
                                   winner (round_winner.p4); ADD, FIRST or READ_HIGH in
                                   the lane pass (Tofino 1's test build) */
#if P4REDUCE_SILENT_ROUNDS
    bit<8>  expected;           /* silent rounds: the next round's expected ranks, which the
                                   read-out pass stores with the winner (rank_next.p4) */
#endif
#if P4REDUCE_DROP_SIMULATOR
    bit<16> sim_egress_threshold;
    bit<32> sim_seed;
    bit<32> sim_sequence;
#endif
}

/* Pipe 0's recirculation port, where the harvest pass goes: dev port 68 on Tofino 1, dev
 * port 6 on Tofino 2 (p4reduce/target.py keeps both out of the operator's ports). */
#if __TARGET_TOFINO__ == 2
const bit<9> HARVEST_PORT = 6;
#else
const bit<9> HARVEST_PORT = 68;
#endif
#endif

#define P4REDUCE_ARCH_HEADERS bridge_t bridge;

/* The winner check (round_winner.p4) is built for Tofino 2, and for Tofino 1 without the
 * drop simulator (the production build); Tofino 1's test build passes IN_ROUND = true and
 * rank_bit to the bitmap step (docs/tofino.md, "Stray frames on TNA"). */
#if __TARGET_TOFINO__ == 2 || !P4REDUCE_DROP_SIMULATOR
#define P4REDUCE_WINNER_CHECK 1
#else
#define P4REDUCE_WINNER_CHECK 0
#endif

/* Every build but one runs the lane pairs in the first pass, after the bitmap step, each
 * chosen by a table from the bitmap's answer (value_aggregation.p4); Tofino 1 carries
 * TNA_BLOCK_VALUES_T1 values for that (values.p4). Tofino 1's test build, whose drop
 * simulator takes two more stages before the bitmap, has a *lane pass*: a packet with lanes
 * recirculates once with the bridge header, whose lane_op the first pass decided, and the
 * pairs run in the second pass (docs/tofino.md, "The lane pass: Tofino 1's test build"). */
#ifndef P4REDUCE_LANE_PASS
#if __TARGET_TOFINO__ != 2 && P4REDUCE_DROP_SIMULATOR
#define P4REDUCE_LANE_PASS 1
#else
#define P4REDUCE_LANE_PASS 0
#endif
#endif
/* Pins for Tofino 1's production build: the winner check and the read-out pass's winner
 * store (one register, so one stage) in stage 3, beside the slot epoch; unpinned, bf-p4c
 * 9.13.4 placed the store four stages after the check, which the assembler refused ("No
 * phv record meta.rank_bit"). With the pins below (P4REDUCE_PINNED: Tofino 1's one-pass
 * build) the slot epoch and winner run in stage 3, the bitmap in 4, and the next key, the
 * fingerprint range and the first pairs in 5 (docs/tofino.md, "One pass on Tofino 1"). */
#if __TARGET_TOFINO__ != 2 && !P4REDUCE_DROP_SIMULATOR
#define WINNER_STAGE @stage(3)
#else
#define WINNER_STAGE
#endif
#ifndef P4REDUCE_PINNED
#if __TARGET_TOFINO__ != 2 && !P4REDUCE_LANE_PASS
#define P4REDUCE_PINNED 1
#else
#define P4REDUCE_PINNED 0
#endif
#endif
#if P4REDUCE_PINNED
#define SLOT_EPOCH_STAGE @stage(3)
#define BITMAP_STAGE @stage(4)
#define PROTOCOL_TAIL_STAGE @stage(5)
#else
#define SLOT_EPOCH_STAGE
#define BITMAP_STAGE
#define PROTOCOL_TAIL_STAGE
#endif

/* TNA's own metadata. pool_slot_16, slot_index_16: the pool slot and the register index
 * (pool_slot * 2 + slot_version < 2048) in 16 bits, instead of metadata_t's 32-bit
 * pool_slot and slot_index (v1model's), which would take PHV the value lanes need.
 * epoch_verdict: what the slot epoch step returned (EPOCH_SAME, ...), read by the bitmap
 * step; encoding_differs: FLAG_SILENT ++ FLAG_PACKED xor the job's round mode ++ encoding
 * (not 0: the packet is not of its job's framing); sim_keep: the drop
 * simulator's verdict (0: the packet is lost); seen: the sender's bit in the round's bitmap
 * (not 0: a duplicate), which the fingerprint, next key and lanes read a stage before
 * meta.duplicate exists; bitmap_before: the round's bitmap before this packet
 * (ROUND_COMPLETE: the round is done); complete_diff: bitmap_before ^ others_mask, 0
 * exactly when this packet completes the round (a gateway compares one field with a
 * constant, not two 32-bit fields); winner_probe: version ++ block, what round_winner
 * holds for the round a contribution may join (round_winner.p4); joining_bit: what the
 * winner check returned, the sender's bit or 0 (no round takes the packet), the bitmap
 * step's input; lane_op: what the lane pairs and the fingerprint range do in this pass
 * (value_aggregation.p4), the bridge's lane_op in a recirculated pass. Kept as
 * fields rather than flags derived from them, because every derived flag is one more MAU
 * stage. */
#define P4REDUCE_ARCH_METADATA bit<16> pool_slot_16; bit<16> slot_index_16;                  \
    bit<32> epoch_verdict; bit<2> encoding_differs; bit<16> sim_keep;                     \
    bit<32> seen; bit<32> bitmap_before; bit<32> complete_diff;                          \
    bit<32> winner_probe; bit<32> joining_bit; bit<3> lane_op; P4REDUCE_UPLINK_METADATA

/* The leaf role (uplink.p4, docs/tofino.md "The leaf role on TNA"): built wherever the
 * winner check is -- both Tofino 2 builds and Tofino 1's production build (docs/tofino.md,
 * "Fit"). Tofino 1's test build has no winner check, which the role reads, and stores the
 * spine's RESULT with the pairs' overwrite step in the first pass, which a lane-pass build
 * does not run there. */
#ifndef P4REDUCE_LEAF_ROLE
#if P4REDUCE_WINNER_CHECK
#define P4REDUCE_LEAF_ROLE 1
#else
#define P4REDUCE_LEAF_ROLE 0
#endif
#endif
/* The uplink entry (the leaf's port towards the spine, the spine's addresses, the leaf's
 * rank in the spine's job: what the partial the read-out pass sends up carries) and, for a
 * first pass, downlink: a RESULT or STATUS, which only the spine sends. A first pass turns
 * uplink_port and uplink_ip into their xor with the packet's ingress port and IPv4 source,
 * both 0 exactly when the packet comes from the uplink (a gateway compares a field with a
 * constant); the read-out pass reads them as the entry has them. */
#if P4REDUCE_LEAF_ROLE && !P4REDUCE_WINNER_CHECK
#error "the leaf role reads whether a round holds its result from the winner check"
#endif
#if P4REDUCE_LEAF_ROLE
#define P4REDUCE_UPLINK_METADATA bit<1> has_uplink; bit<9> uplink_port; mac_t uplink_mac;   \
    ipv4_addr_t uplink_ip; rank_t uplink_rank; bit<1> downlink; bit<1> spine_result; \
    bit<1> up_if_cached;
#else
#define P4REDUCE_UPLINK_METADATA
#endif
