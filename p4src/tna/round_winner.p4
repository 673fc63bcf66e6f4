/* The winner check on TNA (docs/protocol.md section 8, docs/tofino.md "Stray frames on
 * TNA"), built where P4REDUCE_WINNER_CHECK is set (bridge.p4: every build but Tofino 1's
 * test build). v1model reads the other version's next_key cell before the bitmap; on a Tofino
 * pipeline next_key lives in one stage, after the bitmap (its minimum needs the bitmap's
 * answer), so the winner has a register of its own, `round_winner`, one 32-bit cell per pool
 * slot, in a stage before the bitmap:
 *
 *   version of the round it names ++ winner (bit 24, bits 23..0)
 *
 * i.e. exactly what a new contribution must carry: the block and version of the round that
 * follows the slot's last completed round. Every contribution compares it with its own
 * slot_version ++ block; the check returns the sender's bit (1 << rank) when they are
 * equal and 0 otherwise, and the bitmap step takes that bit as its input: 0 changes no bit
 * and completes nothing, and the packet, unless the bitmap finds it a duplicate, is stale.
 *
 * The cell is written by the **read-out pass**: every RESULT, completing or cached, with or
 * without values, leaves the switch only through a recirculated pass on the harvest port,
 * which writes the winner it carries before the packet is multicast or unicast. So no rank
 * can hold a result before the winner it names is stored, and a lost read-out pass is
 * repaired by the cached RESULT that every rank's retransmission then gets (its read-out pass
 * writes the same cell again). The recirculated pass re-enters ingress, so the one stateful
 * ALU of round_winner runs the check for contributions and the store for read-out passes,
 * chosen by the pass (the two call sites are the two branches of one if in p4reduce.p4).
 *
 * An announce round whose fingerprint range differs names END_OF_STREAM, as on v1model: the
 * read-out pass rewrites the RESULT's next block (and exponent 0) and stores that winner. */
#ifndef P4REDUCE_TNA_ROUND_WINNER_P4
#define P4REDUCE_TNA_ROUND_WINNER_P4

/* contribution: the sender's bit if the cell names this packet's block and version */
#define WINNER_CHECK_BODY                                                      \
    rv = 0;                                                                    \
    if (value == meta.winner_probe) {                                          \
        rv = meta.rank_bit;                                                    \
    }
/* read-out pass: the winner of the round this RESULT reports, with the next round's version
 * (the probe carries the RESULT's own version: bit 24 flips here, so that the probe needs no
 * stage to compute the next version first) */
#define WINNER_STORE_BODY                                                      \
    value = meta.winner_probe ^ 32w0x01000000;                                 \
    rv = 0;

/* Silent rounds (rank_next.p4): the cell is a pair, lo the winner as above, hi the expected
 * ranks of the round it names. The every-rank check and the store read and write lo as the
 * bodies above do the cell; the store also writes hi, the mask the RESULT's read-out pass
 * carries in the bridge (0 for an every-rank job, which never reads it), which ReadOut puts
 * in rank_bit (unused in a read-out pass): a stateful ALU reads two PHV inputs, and the
 * check reads the probe and rank_bit. */
#define WINNER_CHECK_PAIR_BODY                                                 \
    rv = 0;                                                                    \
    if (value.lo == meta.winner_probe) {                                       \
        rv = meta.rank_bit;                                                    \
    }
#define WINNER_STORE_PAIR_BODY                                                 \
    value.lo = meta.winner_probe ^ 32w0x01000000;                              \
    value.hi = meta.rank_bit;                                                  \
    rv = 0;
/* A silent job's check: the round's expected ranks if the cell names this packet's block
 * and version, else 0. (A stateful ALU on a pair cell outputs a half or a result it writes
 * back, not hi & rank_bit: p4reduce.p4's round_expected turns the answer into the sender's
 * bit -- 0 for a rank the round does not expect, which joins nothing -- and the expected
 * ranks without the sender, what the bitmap step completes the round against, in the next
 * stage.) */
#define SILENT_CHECK_BODY                                                      \
    rv = 0;                                                                    \
    if (value.lo == meta.winner_probe) {                                       \
        rv = value.hi;                                                         \
    }

/* A contribution's probe: version ++ block, through an identity hash. (An ALU shift of the
 * block would tie the probe to the block's 8-bit containers, which the value lanes need; the
 * hash unit assembles any bytes into one 32-bit field.) */
control WinnerProbe(inout headers_t hdr, inout metadata_t meta) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) probe_hash;
    action probe() {
        meta.winner_probe = probe_hash.get({ hdr.p4r.slot_version, hdr.p4r.block[23:0] });
    }
    apply {
        probe();
    }
}

/* The read-out pass's probe: the RESULT's version ++ its next block -- END_OF_STREAM for an
 * announce round whose fingerprint range differs (range_diff, its fingerprint minimum xor
 * maximum as it arrived, not 0) -- and the pool slot, which the bridge carries as the
 * register index (pool_slot * 2 + slot_version). The store flips the version. All of it
 * within two stages, so that the store runs in the winner check's stage. */
control ReadOut(inout headers_t hdr, inout metadata_t meta, in bit<32> range_diff) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) probe_hash;
#if P4REDUCE_SILENT_ROUNDS
    /* through the hash unit, as the probe: a move would tie rank_bit's containers to the
     * bridge's */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) mask_hash;
#endif
    action read_out_slot() {
        meta.pool_slot_16 = hdr.bridge.slot_index >> 1;
        meta.winner_probe = probe_hash.get({ hdr.p4r.slot_version, hdr.p4r.next_block[23:0] });
    }
#if P4REDUCE_SILENT_ROUNDS
    /* an action of its own: a table's hash results take at most 32 bits */
    action read_out_mask() {
        meta.rank_bit = mask_hash.get({ hdr.bridge.expected });
    }
#endif
    action no_next_block() {
        hdr.p4r.next_block = END_OF_STREAM;
        hdr.p4r.next_exponent = 0;
        meta.winner_probe = meta.winner_probe | (bit<32>)END_OF_STREAM;
    }
    apply {
        read_out_slot();
#if P4REDUCE_SILENT_ROUNDS
        read_out_mask();
#endif
        if (hdr.fingerprint.isValid() && range_diff != 0) {
            no_next_block();
        }
    }
}
#endif
