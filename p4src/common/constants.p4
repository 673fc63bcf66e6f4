/* p4reduce constants shared by every control. docs/protocol.md explains each one. */
#ifndef P4REDUCE_CONSTANTS_P4
#define P4REDUCE_CONSTANTS_P4
#include "types.p4"

/* Protocol version carried in every p4reduce header. */
const protocol_t PROTOCOL_VERSION = 2;

/* Message types (p4reduce_t.msg_type). */
const msg_type_t MSG_ANNOUNCE = 1;   /* round 0 of a slot: header only, announces the first block */
const msg_type_t MSG_DATA     = 2;   /* a non-zero block of LANES values + announcement */
const msg_type_t MSG_SKIP     = 3;   /* the sender's block this round is zero: header only */
const msg_type_t MSG_RESULT   = 4;   /* switch -> workers: the round's sum + the next block */
const msg_type_t MSG_STATUS   = 5;   /* switch -> worker: your retransmission found the round
                                    incomplete; here are the ranks that have contributed */
const msg_type_t MSG_REWIND   = 6;   /* silent rounds: worker -> switch "re-aggregate the slot
                                    from next_block"; switch -> workers a RESULT whose next
                                    round is that rewind round */

/* Flags (p4reduce_t.flags, 7 bits). */
const flags_t FLAG_OVERFLOW   = 0x01;  /* an int32 partial sum of this round overflowed */
const flags_t FLAG_RETRANSMIT = 0x02;  /* worker -> switch: this packet is a retransmission */
const flags_t FLAG_CACHED     = 0x04;  /* switch -> worker: result served from the slot by unicast */
const flags_t FLAG_CONTINUED  = 0x08;  /* worker -> switch: the sender has had a result on this
                                         slot in this job, so the slot must hold the job's state */
const flags_t FLAG_STATE_LOST = 0x10;  /* switch -> worker: the slot lost the job's state (switch
                                         restart, pipeline replaced); the job cannot go on */
const flags_t FLAG_PACKED     = 0x20;  /* both ways: a packed-encoding job's packet (values are
                                       * bias-shifted lanes added as one word) */
const flags_t FLAG_SILENT     = 0x40;  /* both ways: a packet of a job of silent rounds */
/* Two bits of silent rounds' loss recovery, each in a direction its bit is free in
 * (docs/protocol.md section 2): */
const flags_t FLAG_COVERED    = 0x04;  /* worker -> switch, a silent job's DATA (FLAG_CACHED's
                                         bit): the sender holds every earlier result of the
                                         slot in this call */
const flags_t FLAG_ENDED      = 0x02;  /* switch -> worker, a silent job's RESULT
                                         (FLAG_RETRANSMIT's bit): the round ended the slot's
                                         call, no closing round follows */

/* A job's encoding (docs/protocol.md section 10), set at job creation in its admission
 * entry; every packet of the job carries it as FLAG_PACKED. */
const encoding_t ENCODING_LANES  = 0;   /* int32 lanes, added lane by lane, overflow detected */
const encoding_t ENCODING_PACKED = 1;   /* lanes biased to stay >= 0: one wide add (v1model) */

/* A job's round mode (docs/protocol.md section 6), set at job creation in its admission
 * entry; every packet of a job of silent rounds carries FLAG_SILENT. */
const round_mode_t ROUND_MODE_EVERY_RANK = 0; /* every rank sends once per slot per round */
const round_mode_t ROUND_MODE_SILENT     = 1; /* a rank sends only for its non-zero blocks */

/* Block indices are 24-bit; END_OF_STREAM ends a slot (and marks the announce round's block). */
const block_t END_OF_STREAM = 0x00FFFFFF;

/* UDP destination ports 0x5030..0x503F carry p4reduce. */
const udp_port_t P4REDUCE_UDP_BASE = 0x5030;
const bit<16> P4REDUCE_UDP_MASK = 0xFFF0;

/* Values per packet (K) of the TNA program and of a job whose creator names no other size
 * (the v1model program's other sizes: FOR_EACH_BLOCK_SIZE, v1model/values.p4). Changing
 * it means editing lanes.p4 too. */
#define LANES 64
/* Lengths of the four message layouts: header only (SKIP, RESULT of a lost slot), with
 * values (DATA, RESULT of a data round: LANES values here, K of a job's size on v1model,
 * i.e. the header-only length + 4K), with the fingerprint range (ANNOUNCE and its
 * RESULT), with the round status (STATUS). Anything else is malformed. */
#define P4R_HEADER_BYTES 20
const bit<16> UDP_LEN_HEADER_ONLY      = 8 + P4R_HEADER_BYTES;
const bit<16> UDP_LEN_WITH_VALUES      = 8 + P4R_HEADER_BYTES + 4 * LANES;
const bit<16> UDP_LEN_WITH_FINGERPRINT = 8 + P4R_HEADER_BYTES + 8;
const bit<16> UDP_LEN_WITH_STATUS      = 8 + P4R_HEADER_BYTES + 4;
const bit<16> IPV4_LEN_HEADER_ONLY      = 20 + UDP_LEN_HEADER_ONLY;
const bit<16> IPV4_LEN_WITH_VALUES      = 20 + UDP_LEN_WITH_VALUES;
const bit<16> IPV4_LEN_WITH_FINGERPRINT = 20 + UDP_LEN_WITH_FINGERPRINT;
const bit<16> IPV4_LEN_WITH_STATUS      = 20 + UDP_LEN_WITH_STATUS;
#define ETHERNET_BYTES 14

/* A job's epoch names one incarnation of it (the controller never reuses one while the
 * state file lives): 1..2^31-1. A slot whose epoch register holds epoch | EPOCH_LOST lost
 * that job's state and answers every packet of the job with FLAG_STATE_LOST. */
const epoch_t EPOCH_LOST = 0x80000000;
/* What a slot's epoch step returns (common/bodies/contributor_bitmap.p4): the slot holds
 * this packet's epoch, or this epoch marked lost, or another epoch (replaced). */
const bit<32> EPOCH_SAME = 0;
const bit<32> EPOCH_MARKED_LOST = 1;
const bit<32> EPOCH_OTHER = 2;

/* A contributor bitmap half whose round every rank has joined (common/bodies/
 * contributor_bitmap.p4): all ones, which no round in progress can hold (its completing
 * rank's bit is missing). */
const bitmap_t ROUND_COMPLETE = 0xFFFFFFFF;

/* State budget: POOL_SLOTS aggregation slots, each with two versions (shadow copies). */
#define POOL_SLOTS 1024
#define SLOT_ENTRIES (POOL_SLOTS * 2)   /* index = pool_slot * 2 + slot_version */
#define MAX_JOBS 64         /* per-job counters are indexed by the job's index 0..63 */
#define MAX_WORKERS 32      /* width of the contributor bitmap */
/* X(i) for every rank 0..MAX_WORKERS-1: what a silent round's completion unrolls (the
 * minimum over every rank's announced key, v1model/rank_next.p4) */
#define FOR_EACH_RANK(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) \
    X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) \
    X(26) X(27) X(28) X(29) X(30) X(31)

/* Table sizes: admission and result destinations hold one entry per worker of every job. */
#define ADMISSION_ENTRIES (MAX_JOBS * MAX_WORKERS * 2)
#define RESULT_DESTINATION_ENTRIES (MAX_JOBS * MAX_WORKERS * 2)
#define L2_ENTRIES 1024

/* Switch-wide drop reasons (index of the `drops` counter). */
const bit<32> DROP_MALFORMED      = 0;  /* parser error, bad checksum, bad version/type/field */
const bit<32> DROP_UNADMITTED     = 1;  /* no admission entry for (port, MAC, IP, job, rank) */
#define DROP_REASONS 2

/* bmv2's standard_metadata.instance_type for multicast replicas. */
const bit<32> PKT_INSTANCE_TYPE_REPLICATION = 5;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> ARP_OPER_REQUEST = 1;
const bit<16> ARP_OPER_REPLY   = 2;

#endif
