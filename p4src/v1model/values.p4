/* A block's values on v1model: one header per block size K (FOR_EACH_BLOCK_SIZE), each a
 * single word of K 32-bit lanes, lane 0 the most significant. The parser extracts the one
 * whose length a DATA frame has; a job's registers, its RESULTs and its SKIPs use the one of
 * the job's size (meta.block_values). p4c-bm2-ss compiles no type wider than 2048 bits, so
 * every word is written bit<2048> and p4src/compile.py widens, by name, each size's header
 * type (values_K_t), register (sums_K), the locals and lane-pattern constants of its
 * actions (*_K) to 32K bits: bmv2 and softswitch add a wide word in one operation, so a
 * block costs one register read-add-write whatever its size. Included before
 * ../common/headers.p4, which places these headers where the values go. */
#ifndef P4REDUCE_V1MODEL_VALUES_P4
#define P4REDUCE_V1MODEL_VALUES_P4
#include "../common/types.p4"
#include "../common/constants.p4"

/* The values per block a job may choose (docs/protocol.md section 1;
 * p4reduce.target.V1MODEL_BLOCK_SIZES): X(K) per size, the default (LANES) first. A DATA
 * of K values is an IPv4 packet of 48 + 4K bytes, which must stay within IPv4's 65 535
 * (K <= 16 371): 8 192 is the widest power of two (32 816 bytes), 16 000 the wire's
 * widest block (p4reduce.wire.MAX_BLOCK_VALUES: 64 048 bytes, 250 rows of 64). */
#define FOR_EACH_BLOCK_SIZE(X) X(64) X(128) X(256) X(512) X(1024) X(2048) X(4096) X(8192) X(16000)

#define VALUES_HEADER_TYPE(K) header values_##K##_t { bit<2048> word; }
FOR_EACH_BLOCK_SIZE(VALUES_HEADER_TYPE)

/* The most values a header-only frame (a SKIP) may become a RESULT of: simple_switch gives
 * a received frame 512 bytes of room to grow (bmv2's packet buffer), 4 * 128. A SKIP of a
 * job of more values per block carries a values block of its job's size (its contents
 * ignored), so the frame has the result's length already; a header-only one is dropped
 * and counted (wrong_encoding) -- on every v1model target alike. A SKIP of a smaller
 * block is header only (one with values is malformed). */
#define SKIP_GROWS_TO_VALUES 128

/* held_K: the register cell an add reads (value_aggregation.p4). A header, not a local:
 * bmv2 zeroes all user metadata (locals included) when a packet arrives and copies it into
 * every multicast copy, at a cost that grows with the width (32K bits per size). The
 * header is never made valid, so neither happens; bmv2 and softswitch keep what an action
 * writes into a field of an invalid header, and the deparser never emits it. */
#define VALUES_HEADER(K) values_##K##_t values_##K; values_##K##_t held_##K;
#define P4REDUCE_ARCH_VALUES FOR_EACH_BLOCK_SIZE(VALUES_HEADER)
/* the size of a DATA's (or a padded SKIP's) values header, set by the parser (0: none);
 * then the leaf role's fields (uplink.p4) */
#define P4REDUCE_ARCH_METADATA                                                 \
    block_values_t data_values;                                                \
    bit<32> rank_cell_index;  /* RankNext: the next rank's cell of the slot */   \
    bit<32> sim_key;          /* drop_simulator.p4: a roll's hash as it is mixed */ \
    bit<1> repaired;          /* repair_mark.p4: the round's RESULT is FLAG_REPAIRED */ \
    bit<1> job_first;         /* RoundWinner: an ANNOUNCE not CONTINUED (the job's first round) */ \
    P4REDUCE_UPLINK_METADATA
#define P4REDUCE_UPLINK_METADATA                                               \
    bit<1> has_uplink;        /* the job has an uplink entry here: a leaf's job */ \
    PortId_t uplink_port;                                                      \
    mac_t uplink_mac;         /* the spine's */                               \
    ipv4_addr_t uplink_ip;                                                     \
    rank_t uplink_rank;       /* this leaf's rank in the spine's job */       \
    bit<1> from_uplink;       /* arrived by the uplink from the spine */      \
    bit<1> downlink;          /* a RESULT or STATUS (only the spine sends one) */ \
    bit<1> store_result;      /* a spine's RESULT the round waits for */       \
    bit<1> result_was_held;   /* result_held as read */                       \
    bit<1> send_up;           /* the packet leaves by the uplink as the leaf's partial */ \
    bit<1> relay_up;          /* silent: a rank's REWIND request, sent up as the leaf's */ \
    bit<1> leaf_empty;        /* silent: none of the leaf's ranks is in its next round */ \
    bit<32> partial_key;      /* silent: the key the leaf's partial announces (its minimum) */ \
    bit<1> partial_covered;   /* silent: the leaf's partial is COVERED (every rank's DATA was) */ \
    bit<1> every_leaf;        /* silent, a spine: every rank (leaf) takes part in every round */ \
    bit<1> status_to_round;   /* silent, a leaf: its STATUS only to the asker and the round's ranks */

/* CALL_FOR_JOB_SIZE calls action SIZE_ACTION_K (SIZE_ACTION defined by the caller) of the
 * job's size K: bmv2 pays per table, an if chain is cheaper than a table keyed on the size,
 * and the default size (64) comes first */
#define SIZE_NAME_(A, K) A##_##K
#define SIZE_NAME(A, K) SIZE_NAME_(A, K)
#define CALL_IF_SIZE(K) if (meta.block_values == K) { SIZE_NAME(SIZE_ACTION, K)(); } else
#define CALL_FOR_JOB_SIZE FOR_EACH_BLOCK_SIZE(CALL_IF_SIZE) {}

/* whether the packet carries any block of values */
#define VALUES_VALID_OR(K) hdr.values_##K.isValid() ||
#define ANY_VALUES_VALID (FOR_EACH_BLOCK_SIZE(VALUES_VALID_OR) false)
#define VALUES_INVALIDATE(K) hdr.values_##K.setInvalid();
#define INVALIDATE_VALUES FOR_EACH_BLOCK_SIZE(VALUES_INVALIDATE)
#endif
