/* The architecture-neutral names the shared controls (../common/*.p4) use, for TNA
 * (Tofino, Tofino 2): the same names as ../v1model/arch.p4. Ingress controls take the three
 * ingress intrinsic structs, egress controls the two egress ones. */
#ifndef P4REDUCE_TNA_ARCH_P4
#define P4REDUCE_TNA_ARCH_P4
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

/* tna.p4 declares PortId_t (bit<9>) and MulticastGroupId_t (bit<16>) */

#define INGRESS_INTRINSIC_PARAMS in ingress_intrinsic_metadata_t ig_intr_md,              \
    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,                         \
    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md
#define EGRESS_INTRINSIC_PARAMS in egress_intrinsic_metadata_t eg_intr_md,                \
    inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md
#define INGRESS_PORT ig_intr_md.ingress_port
#define EGRESS_RID eg_intr_md.egress_rid

/* A flooded frame is marked multicast: TNA's egress prunes the copy for the ingress port
 * by the bridged port (v1model's by instance type). */
#define SEND_TO_PORT(port) ig_tm_md.ucast_egress_port = (port)
#define FLOOD_TO_GROUP(group) ig_tm_md.mcast_grp_a = (group); meta.multicast = 1
#define DROP_PACKET() ig_dprsr_md.drop_ctl = 1
#define EGRESS_DROP_PACKET() eg_dprsr_md.drop_ctl = 1

#define PACKET_COUNTER(IndexT, size, name) \
    Counter<bit<32>, IndexT>(size, CounterType_t.PACKETS) name
#define COUNT(name, index) name.count(index)

/* A Tofino gateway compares a field with a constant and reads at most 4 bytes (+12 bits):
 * two fields are compared through their xor, computed in an action first. */
#define P4REDUCE_GATEWAY_COMPARES_FIELDS 0

/* Where egress finds what ingress decided for a packet to a worker */
#define EGRESS_DEST_RANK hdr.bridge.dest_rank
#define EGRESS_MULTICAST hdr.bridge.multicast
/* Whether ResultDestination's action writes the sources (../common/result_destination.p4) */
#define P4REDUCE_EGRESS_WRITES_SOURCE 0
/* What Admission takes: the ingress port and whether the packet is addressed to the switch
 * (its IPv4 destination xor the switch's, 0 when it is) */
#define ADMISSION_INTRINSIC_PARAMS in ingress_intrinsic_metadata_t ig_intr_md,            \
    in bit<32> dst_diff
#endif
