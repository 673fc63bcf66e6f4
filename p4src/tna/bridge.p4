/* What ingress hands to egress on TNA (v1model carries user metadata to egress itself):
 * the fields ResultDestination and the egress drop simulator read. Emitted first by the
 * ingress deparser, parsed first by the egress parser, never sent on a wire. */
#ifndef P4REDUCE_TNA_BRIDGE_P4
#define P4REDUCE_TNA_BRIDGE_P4
@flexible
header bridge_t {
    /* @flexible: bf-p4c packs these as PHV allocation needs (no pads). With fixed pads,
     * the ingress actions that write the metadata aliased to them (meta.to_worker, ...)
     * made partial writes of one container, which Tofino's ALUs cannot do. */
    bit<1>  to_worker;
    bit<8>  dest_rank;          /* unicast replies: the sender; multicast: from the rid */
    bit<8>  job_index;
    bit<1>  multicast;
    bit<48> switch_mac;
    bit<32> switch_ip;
    bit<16> sim_egress_threshold;
    bit<32> sim_seed;
    bit<32> sim_sequence;
    bit<1>  sim_random;
    bit<9>  ingress_port;       /* a flooded copy is not sent back out of it */
    bit<1>  harvest;            /* the packet goes to its second pass (harvest_t follows) */
}
#endif

/* A RESULT with values leaves ingress once to read the low lanes of its pairs: a Tofino
 * ALU returns one value, so the contribution pass returns the high lanes and a second pass
 * (recirculation) reads the low ones. It carries where the result goes afterwards. Only
 * packets that complete a round, or ask for a cached result, take the second pass. */
#ifndef P4REDUCE_TNA_HARVEST
#define P4REDUCE_TNA_HARVEST
header harvest_t {
    bit<7>  pad;
    bit<9>  reply_port;         /* unicast replies: the sender's port */
    bit<7>  pad2;
    bit<1>  multicast;
    bit<16> mcast_grp;
    bit<8>  job_index;
    bit<32> slot_index;
    bit<16> sim_egress_threshold;
    bit<32> sim_seed;
    bit<32> sim_sequence;
    bit<7>  pad3;
    bit<1>  sim_random;
}

/* Pipe 0's recirculation port, where the harvest pass goes: dev port 68 on Tofino 1, dev
 * port 6 on Tofino 2 (controlplane/target.py keeps both out of the operator's ports). */
#if __TARGET_TOFINO__ == 2
const bit<9> HARVEST_PORT = 6;
#else
const bit<9> HARVEST_PORT = 68;
#endif
#endif

#define P4REDUCE_ARCH_HEADERS bridge_t bridge; harvest_t harvest;
