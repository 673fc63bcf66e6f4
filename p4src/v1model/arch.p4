/* The architecture-neutral names the shared controls (../common/*.p4) use, for v1model
 * (bmv2, softswitch); ../tna/arch.p4 defines the same names for TNA. A shared control
 * names a port, a drop, a counter or the multicast group only through these, so its tables,
 * keys, actions and @names are written once for both programs. */
#ifndef P4REDUCE_V1MODEL_ARCH_P4
#define P4REDUCE_V1MODEL_ARCH_P4
#include <core.p4>
#include <v1model.p4>

/* TNA's names for a port and a multicast group (v1model.p4 declares PortId_t only from
 * its 2020 version on) */
#if V1MODEL_VERSION < 20200408
typedef bit<9> PortId_t;
#endif
typedef bit<16> MulticastGroupId_t;

/* A control's intrinsic metadata: parameters and arguments */
#define INGRESS_INTRINSIC_PARAMS inout standard_metadata_t standard_metadata
#define EGRESS_INTRINSIC_PARAMS inout standard_metadata_t standard_metadata
#define INGRESS_PORT standard_metadata.ingress_port
#define EGRESS_RID standard_metadata.egress_rid

/* What ingress and egress do to a packet */
#define SEND_TO_PORT(port) standard_metadata.egress_spec = (port)
#define FLOOD_TO_GROUP(group) standard_metadata.mcast_grp = (group)
#define DROP_PACKET() mark_to_drop(standard_metadata)
#define EGRESS_DROP_PACKET() mark_to_drop(standard_metadata)

/* A packet counter of `size` cells indexed by IndexT (v1model indexes with bit<32>) */
#define PACKET_COUNTER(IndexT, size, name) counter(size, CounterType.packets) name
#define COUNT(name, index) name.count((bit<32>)(index))

/* A gateway of this architecture compares two fields directly (bmv2 evaluates any
 * expression); TNA's compares a field with a constant (its arch.p4 sets this to 0). */
#define P4REDUCE_GATEWAY_COMPARES_FIELDS 1

/* Where egress finds what ingress decided for a packet to a worker */
#define EGRESS_DEST_RANK meta.dest_rank
#define EGRESS_MULTICAST meta.multicast
/* Whether ResultDestination's action writes the sources (../common/result_destination.p4) */
#define P4REDUCE_EGRESS_WRITES_SOURCE 1
/* What Admission takes: the intrinsic metadata (../common/admission.p4) */
#define ADMISSION_INTRINSIC_PARAMS inout standard_metadata_t standard_metadata
#endif
