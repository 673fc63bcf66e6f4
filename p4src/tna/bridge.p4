/* What ingress hands to egress on TNA (v1model carries user metadata to egress itself):
 * the fields ResultDestination and the egress drop simulator read. Emitted first by the
 * ingress deparser, parsed first by the egress parser, never sent on a wire. */
#ifndef P4REDUCE_TNA_BRIDGE_P4
#define P4REDUCE_TNA_BRIDGE_P4
header bridge_t {
    /* Laid out for bridge_fields, which copies these from metadata in one action: a Tofino
     * ALU writes a container from at most two sources (one if a constant is among them),
     * so no cast (its zero bits are a constant), and the 1-bit flags share one byte that
     * the compiler can fill from one container of metadata flags. */
    bit<1>  to_worker;
    bit<1>  multicast;
    bit<1>  sim_random;
    bit<1>  harvest;            /* the packet goes to its second pass (harvest_t follows) */
    bit<4>  pad;
    bit<8>  dest_rank;          /* unicast replies: the sender; multicast: from the rid */
    bit<8>  job_index;
    bit<7>  pad2;
    bit<9>  ingress_port;       /* a flooded copy is not sent back out of it */
    bit<16> sim_egress_threshold;
    bit<32> sim_seed;
    bit<32> sim_sequence;
}
#endif

/* A RESULT with values leaves ingress once to read the low lanes of its pairs: a Tofino
 * ALU returns one value, so the contribution pass returns the high lanes and a second pass
 * (recirculation) reads the low ones. It carries where the result goes afterwards. Only
 * packets that complete a round, or ask for a cached result, take the second pass. */
#ifndef P4REDUCE_TNA_HARVEST
#define P4REDUCE_TNA_HARVEST
header harvest_t {
    /* laid out as bridge_t (see there); the pool slot rather than the register index, so
     * the harvest pass computes the index as admission does */
    bit<7>  pad;
    bit<9>  reply_port;         /* unicast replies: the sender's port */
    bit<1>  multicast;
    bit<1>  sim_random;
    bit<6>  pad2;
    bit<8>  job_index;
    bit<16> mcast_grp;
    bit<32> pool_slot;
    bit<16> sim_egress_threshold;
    bit<32> sim_seed;
    bit<32> sim_sequence;
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
