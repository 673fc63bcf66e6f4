/* Value aggregation (docs/protocol.md section 10), v1model: per block size K one register
 * array sums_K of SLOT_ENTRIES cells, each one word of K 32-bit lanes (values.p4), lane 0
 * the most significant. A job uses the array of its size (meta.block_values); a packet
 * costs one register read-add-write whatever K is. The first contributor of a round
 * overwrites its version's cell (a lanes job's SKIP writes zeros), later contributors add;
 * the packet then carries the running sums, so the packet that completes the round carries
 * the result. A SKIP (header only) that completes a round, and a retransmission of a
 * completed round, get the cell read back into the values header of the job's size.
 *
 * Packed-encoding jobs (quantized floats): each lane arrives as q + bias with
 * 0 <= q + bias <= 2 * bias and bias = floor(M/N), so no lane's N-way sum reaches 2^32 and
 * the block is added as one word, with no overflow check (none can happen). A SKIP adds
 * the bias in every lane (bias * ONES_K: the rank's q is 0 there), so every round's sum is
 * sum(q) + N * bias and the workers remove N * bias without knowing who sent DATA. In a
 * silent data round the ranks without the block send nothing; the round's first DATA
 * brings their bias instead (SilentBias), so the sum is the same. A silent job's closing
 * round sums nothing: its contributions (a SKIP or REWIND of block END_OF_STREAM, the
 * only SKIPs and REWINDs that join a silent round) leave the register alone and drop any
 * values they carry, so its RESULT and the copies served from it are header only.
 *
 * A silent leaf whose ranks are all outside a round sends the spine an empty partial of
 * its ranks' bias (packed) or zeros (lanes): stored here when the spine's result that
 * names the round is (uplink.p4, EmptyPartial).
 *
 * Lanes jobs (int32, exact): the same word added lane by lane without carries between
 * lanes (SWAR): with H = 0x80000000 and L = 0x7FFFFFFF in every lane,
 *     sum = ((a & L) + (b & L)) ^ ((a ^ b) & H)
 * (the low 31 bits of each lane add without leaving it; the top bit is the xor of the
 * operands' top bits and the carry into it). A lane overflowed (int32) when both operands
 * have the same sign and the sum's sign differs: (~(a ^ b) & (a ^ sum) & H) != 0. The
 * per-round overflow bit is sticky and travels in the result (FLAG_OVERFLOW); workers raise
 * instead of returning a wrong sum. Quantized floats cannot overflow by construction
 * (docs/protocol.md).
 *
 * Every word, register, local and lane-pattern constant here is written bit<2048> (the
 * 64-value size, p4c's widest type); p4src/compile.py widens the ones of size K (names
 * ending in _K) to 32K bits after p4c. */
#ifndef P4REDUCE_VALUE_AGGREGATION_P4
#define P4REDUCE_VALUE_AGGREGATION_P4
#include "../common/headers.p4"
#include "../common/bodies/value_aggregation.p4"
#include "../common/bodies/read.p4"
#include "register_step.p4"

/* 64 lanes of 0x00000001, 0x80000000 and 0x7FFFFFFF: a size's actions use them at 2048
 * bits and compile.py repeats the lane to K lanes. bias * LANE_ONES puts bias in every
 * lane. */
#define LANE_ONES 2048w0x00000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001000000010000000100000001
#define LANE_HIGH 2048w0x80000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000800000008000000080000000
#define LANE_LOW 2048w0x7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF7FFFFFFF

/* A silent leaf's empty partial (uplink.p4): its ranks' bias in every lane of a packed
 * job, zeros in a lanes job -- what egress sends up and what a retransmission reads */
#define EMPTY_PARTIAL_WORD                                                     \
    ((meta.encoding == ENCODING_PACKED)                                        \
     ? ((bit<2048>)((bit<32>)meta.worker_count * meta.bias)) * LANE_ONES : 0)

/* A lanes job's lane-wise int32 sum of words A and B (LANE_UPDATE's SWAR form), and
 * whether some lane of it overflowed */
#define SWAR_SUM(A, B) (((A & LANE_LOW) + (B & LANE_LOW)) ^ ((A ^ B) & LANE_HIGH))
#define SWAR_OVERFLOWS(A, B) ((~(A ^ B) & (A ^ SWAR_SUM(A, B)) & LANE_HIGH) != 0)

/* One block size's register and actions (K values per block). An add reads the cell into
 * held_K (values.p4: a scratch header, never valid), adds it into the packet's word and
 * writes the word back: three primitives on the wide word, and no wide local, which bmv2
 * would zero on every packet and copy into every result copy (user metadata;
 * docs/protocol.md section 10). A round's first DATA overwrites the cell with its word as
 * it is (store_K): one primitive, where a read and an assign of its own word would cost
 * bmv2 two more exports of the whole word (it converts a field's value to bytes on every
 * write to it). */
#define SIZE_AGGREGATION(K)                                                    \
    register<bit<2048>>(SLOT_ENTRIES) sums_##K;                                \
    action add_lanes_##K() {                                                   \
        sums_##K.read(hdr.held_##K.word, meta.slot_index);                     \
        meta.lane_overflow = SWAR_OVERFLOWS(hdr.held_##K.word,                 \
                                            hdr.values_##K.word) ? 1w1 : 1w0;  \
        hdr.values_##K.word = SWAR_SUM(hdr.held_##K.word, hdr.values_##K.word); \
        sums_##K.write(meta.slot_index, hdr.values_##K.word);                  \
    }                                                                          \
    action store_first_skip_##K() {                                            \
        hdr.values_##K.setValid();                                             \
        hdr.values_##K.word = 0;                                               \
        sums_##K.write(meta.slot_index, hdr.values_##K.word);                  \
    }                                                                          \
    action store_##K() {                                                       \
        sums_##K.write(meta.slot_index, hdr.values_##K.word);                  \
    }                                                                          \
    action store_empty_##K() {                                                 \
        hdr.held_##K.word = EMPTY_PARTIAL_WORD;                                \
        sums_##K.write(meta.slot_index ^ 1, hdr.held_##K.word);                \
    }                                                                          \
    action read_##K() {                                                        \
        hdr.values_##K.setValid();                                             \
        sums_##K.read(hdr.values_##K.word, meta.slot_index);                   \
    }                                                                          \
    action add_packed_##K() {                                                  \
        sums_##K.read(hdr.held_##K.word, meta.slot_index);                     \
        hdr.values_##K.word = hdr.values_##K.word + hdr.held_##K.word;         \
        sums_##K.write(meta.slot_index, hdr.values_##K.word);                  \
    }                                                                          \
    action add_packed_skip_##K() {                                             \
        sums_##K.read(hdr.held_##K.word, meta.slot_index);                     \
        hdr.held_##K.word = ((bit<2048>)meta.bias) * LANE_ONES                 \
                          + ((meta.first == 1) ? 0 : hdr.held_##K.word);       \
        sums_##K.write(meta.slot_index, hdr.held_##K.word);                    \
        hdr.values_##K.setValid();                                             \
        hdr.values_##K.word = hdr.held_##K.word;                               \
    }

/* Silent rounds (ContributorBitmap applies it, after the bitmap): a silent data round's
 * first DATA of a packed job carries, before ValueAggregation adds it, the bias of every
 * rank the round does not expect, so the result is sum(q) + N * bias as in every round. */
#define SIZE_SILENT_BIAS(K)                                                    \
    action add_bias_##K() {                                                    \
        count_silent_ranks();                                                  \
        hdr.values_##K.word = hdr.values_##K.word                              \
                              + ((bit<2048>)meta.missing_bias) * LANE_ONES;    \
    }

control SilentBias(inout headers_t hdr, inout metadata_t meta) {
#define EXPECTED_COUNT(i) + (bit<8>)meta.expected[i:i]
    action count_silent_ranks() {
        bit<8> count = 8w0 FOR_EACH_RANK(EXPECTED_COUNT);
        meta.missing_bias = (bit<32>)(meta.worker_count - count) * meta.bias;
    }
#undef EXPECTED_COUNT
    /* each size's add counts the silent ranks first: one action, one table in bmv2 */
    FOR_EACH_BLOCK_SIZE(SIZE_SILENT_BIAS)

    apply {
        if (meta.first == 1 && meta.unexpected != 0 && meta.encoding == ENCODING_PACKED
            && hdr.p4r.msg_type == MSG_DATA) {
#define SIZE_ACTION add_bias
            CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
        }
    }
}

control ValueAggregation(inout headers_t hdr, inout metadata_t meta) {
    register<bit<1>>(SLOT_ENTRIES) round_overflow;
    FOR_EACH_BLOCK_SIZE(SIZE_AGGREGATION)

    action accumulate_overflow() {
        /* a leaf's partial carries its own overflow (uplink.p4) */
        meta.lane_overflow = meta.lane_overflow | hdr.p4r.flags[0:0];
        REGISTER_STEP(round_overflow, meta.slot_index, bit<1>, meta.round_overflow,
                      ROUND_OVERFLOW_BODY)
    }
    action read_overflow() {
        REGISTER_STEP(round_overflow, meta.slot_index, bit<1>, meta.round_overflow, READ_BODY)
    }

    /* a spine's RESULT at a leaf (uplink.p4): its overflow bit is the round's */
    action store_overflow() {
        meta.round_overflow = hdr.p4r.flags[0:0];
        round_overflow.write(meta.slot_index, meta.round_overflow);
    }
    /* ... and a silent leaf's empty partial of the next round (RankNext: leaf_empty),
     * made as the result is stored, overflows nothing */
    action clear_next_overflow() {
        round_overflow.write(meta.slot_index ^ 1, 0);
    }

    apply {
        /* meta.lane_overflow and meta.round_overflow start at 0 (v1model zeroes metadata) */
        if (meta.store_result == 1) {
            /* the spine's sums become the round's cached result */
            if (hdr.p4r.msg_type != MSG_ANNOUNCE && !hdr.fingerprint.isValid()) {
#define SIZE_ACTION store
                CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
            }
            store_overflow();
            if (meta.leaf_empty == 1) {
                /* what the leaf's empty partial carries, for a retransmission of it */
#define SIZE_ACTION store_empty
                CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
                clear_next_overflow();
            }
        } else if (meta.duplicate == 1) {
            /* only reached when the round is complete: serve the stored result */
            if (!hdr.fingerprint.isValid()      /* not an announce round's */
                && meta.closing_answer == 0) {  /* nor a closing round's */
#define SIZE_ACTION read
                CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
            }
            if (meta.encoding == ENCODING_LANES) {
                read_overflow();
            }
        } else if (meta.round_mode == ROUND_MODE_SILENT
                   && (hdr.p4r.msg_type == MSG_SKIP || hdr.p4r.msg_type == MSG_REWIND)) {
            /* a closing contribution: nothing to add, and no values to send on; a lanes
             * job's round overflow bit is still the round's (none: its first clears it) */
            INVALIDATE_VALUES
            if (meta.encoding == ENCODING_LANES) {
                accumulate_overflow();
            }
        } else if (meta.encoding == ENCODING_PACKED) {
            if (hdr.p4r.msg_type == MSG_DATA && meta.first == 1) {
#define SIZE_ACTION store
                CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
            } else if (hdr.p4r.msg_type == MSG_DATA) {
#define SIZE_ACTION add_packed
                CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
            } else if (hdr.p4r.msg_type == MSG_SKIP || hdr.p4r.msg_type == MSG_REWIND) {
#define SIZE_ACTION add_packed_skip
                CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
            }
        } else {
            if (hdr.p4r.msg_type == MSG_DATA && meta.first == 1) {
#define SIZE_ACTION store
                CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
            } else if (hdr.p4r.msg_type == MSG_DATA) {
#define SIZE_ACTION add_lanes
                CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
            } else if (hdr.p4r.msg_type == MSG_SKIP || hdr.p4r.msg_type == MSG_REWIND) {
                if (meta.first == 1) {
#define SIZE_ACTION store_first_skip
                    CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
                } else if (meta.complete == 1) {
#define SIZE_ACTION read
                    CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
                }
            }
            accumulate_overflow();
        }
    }
}
#endif
