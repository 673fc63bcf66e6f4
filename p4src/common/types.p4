/* One name per concept (docs/protocol.md), the same for every architecture: the header
 * fields, metadata and table parameters that carry a concept are declared with its type,
 * so a width is stated once. Typedefs, not `type`s: the compiled programs and their
 * P4Info see the same bit<N> as before. */
#ifndef P4REDUCE_TYPES_P4
#define P4REDUCE_TYPES_P4

typedef bit<4>  protocol_t;     /* PROTOCOL_VERSION */
typedef bit<4>  msg_type_t;     /* MSG_* */
typedef bit<7>  flags_t;        /* FLAG_* */
typedef bit<1>  version_t;      /* a slot's shadow copy: round r uses version r % 2 */
typedef bit<16> job_t;          /* job id (admission's key) */
typedef bit<8>  job_index_t;    /* a job's index 0..MAX_JOBS-1: per-job counters */
typedef bit<16> slot_t;         /* slot index within a job's slot range */
typedef bit<8>  rank_t;         /* a worker's rank in its job */
typedef bit<8>  exponent_t;     /* biased exponent (e + EXPONENT_BIAS) */
typedef bit<32> epoch_t;        /* a job's incarnation; EPOCH_LOST marks a lost slot */
typedef bit<32> block_t;        /* a block index (24 bits used), END_OF_STREAM */
typedef bit<32> bitmap_t;       /* one bit per rank (MAX_WORKERS) */
typedef bit<32> lane_t;         /* one value lane (int32 or a packed lane) */
typedef bit<32> fingerprint_value_t; /* what the ranks reduce (dtype, length) */
typedef bit<16> group_t;        /* a multicast group id */
typedef bit<1>  encoding_t;     /* ENCODING_LANES or ENCODING_PACKED */
typedef bit<16> block_values_t; /* a job's values per block (K): one of BLOCK_SIZES */
typedef bit<1>  round_mode_t;   /* who sends in a round: ROUND_MODE_EVERY_RANK or _SILENT */
typedef bit<48> mac_t;
typedef bit<32> ipv4_addr_t;
typedef bit<16> udp_port_t;
#endif
