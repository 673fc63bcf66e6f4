/* The leaf role (docs/fabric.md, "The leaf and spine roles"): a job with an uplink entry
 * on this switch is one level of a two-level job. The switch aggregates its own ranks as
 * ever, but the packet that completes a round leaves by the uplink as the switch's
 * contribution to the spine's round (Result.make_partial), and the spine's RESULT, arriving
 * from the uplink, becomes the round's cached result here and goes to the ranks.
 *
 * Per (slot, version) one bit beside the bitmap, result_held: 1 once the round's result
 * (the spine's) is stored, 0 from the round's completion here until then. A rank's
 * retransmission to a complete round therefore gets the cached RESULT (held) or makes the
 * switch send its partial up again (not held): that repairs a partial lost on the way up
 * and a result lost on the way down (the spine answers the repeated partial from its
 * cache). A RESULT from the spine is stored only by a round waiting for it, so a late
 * copy of one already stored changes nothing.
 *
 * A rank's state probe (bit 2, p4reduce.wire.Flag.PROBE; hostlib's engine: a done
 * slot's packet resent while the rank waits on a slot the switch holds) goes up even
 * when the result is held: it asks whether the switches still hold the job, and the leaf
 * can answer only for itself. A spine that restarted answers STATE_LOST (a CONTINUED
 * partial on a slot that forgot the job), which the leaf passes to its ranks; one that
 * did not answers from its cache, and the leaf, holding that result, ends the answer. It
 * is never a new contribution at the spine: its round is complete there (ROUND_COMPLETE
 * in its half, a duplicate), or the slot forgot the job (STATE_LOST) -- the next round
 * of its version would need this rank's packet of a later call.
 *
 * The spine's STATUS (it answers a partial sent again into a round the spine has not
 * completed) goes to the leaf's ranks flagged FLAG_RELAYED: every one of them has
 * contributed, so each learns that the round waits above its leaf, for the leaves the
 * bitmap lacks, and stops asking as it does after its leaf's own STATUS.
 *
 * A job without an uplink entry never reads or writes result_held: the switch completes
 * its rounds itself. A RESULT or STATUS not from the job's uplink (port and spine's IPv4)
 * is malformed, as a RESULT from a worker always was. */
#ifndef P4REDUCE_UPLINK_P4
#define P4REDUCE_UPLINK_P4
#include "../common/headers.p4"
#include "../common/bodies/read.p4"
#include "register_step.p4"
#include "value_aggregation.p4"   /* EMPTY_PARTIAL_WORD: a silent leaf's empty partial */

register<bit<1>>(SLOT_ENTRIES) result_held;

/* A frame from this leaf to the spine: the uplink's addresses, the switch's as sources,
 * and the leaf's rank in the spine's job (Result's partials and relayed requests in
 * ingress, EmptyPartial's empty partials in egress; the port is ingress's to set). */
#define ADDRESS_TO_UPLINK                                                      \
    hdr.p4r.rank = meta.uplink_rank;                                           \
    hdr.ethernet.dst_addr = meta.uplink_mac;                                   \
    hdr.ethernet.src_addr = meta.switch_mac;                                   \
    hdr.ipv4.dst_addr = meta.uplink_ip;                                        \
    hdr.ipv4.src_addr = meta.switch_ip;                                        \
    hdr.udp.src_port = P4REDUCE_UDP_BASE;                                      \
    hdr.udp.dst_port = P4REDUCE_UDP_BASE;                                      \
    hdr.ipv4.ttl = 64;                                                         \
    hdr.udp.checksum = 0;

/* switch -> worker, on a STATUS only (the bit FLAG_CACHED has on a RESULT): the spine's
 * STATUS, relayed by the rank's leaf to its ranks -- the round is complete at the leaf and
 * waits for the spine, whose bitmap counts the job's leaves (p4reduce.wire.Flag.RELAYED) */
const flags_t FLAG_RELAYED = 0x04;

/* A REWIND with a RESULT's layout (the fingerprint range, or values where a SKIP of the
 * job carries none): a silent spine's result, from the uplink; from a rank, malformed. The
 * actions below mark it as from the spine (downlink), so that P4ReduceIngress's one test
 * of the downlink drops a rank's -- in the actions, which run for every packet anyway,
 * since bmv2 and softswitch pay for each test of a control's body. */
#define REWIND_AS_RESULT                                                       \
    (hdr.fingerprint.isValid()                                                 \
     || (meta.data_values != 0 && meta.data_values <= SKIP_GROWS_TO_VALUES))

/* An ANNOUNCE without the block it carries in the leaf role of silent rounds above
 * SKIP_GROWS_TO_VALUES values per block (p4reduce.wire.announce_carries_block) is
 * malformed here: the spine's RESULT of a round it completed would be too short for the
 * leaves' empty partials (EmptyPartial). Only the uplink entry says the job is a leaf's,
 * so set_uplink marks it and P4ReduceIngress drops it with what only a spine sends. */
#define ANNOUNCE_WITHOUT_BLOCK                                                 \
    (hdr.p4r.msg_type == MSG_ANNOUNCE && meta.data_values == 0                 \
     && meta.block_values > SKIP_GROWS_TO_VALUES && meta.round_mode == ROUND_MODE_SILENT)

/* The job's uplink, and for a packet from it whether it is a result to store. Applied to
 * every admitted p4reduce packet, before the bitmap. */
control Uplink(inout headers_t hdr, inout metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    action set_uplink(PortId_t port, mac_t spine_mac, ipv4_addr_t spine_ip, rank_t rank) {
        meta.has_uplink = 1;
        meta.uplink_port = port;
        meta.uplink_mac = spine_mac;
        meta.uplink_ip = spine_ip;
        meta.uplink_rank = rank;
        meta.from_uplink = (standard_metadata.ingress_port == port
                            && hdr.ipv4.src_addr == spine_ip) ? 1w1 : 1w0;
        meta.downlink = (meta.downlink == 1
                         || (hdr.p4r.msg_type == MSG_REWIND
                             && (meta.from_uplink == 1 || REWIND_AS_RESULT))) ? 1w1 : 1w0;
        meta.malformed = ANNOUNCE_WITHOUT_BLOCK ? 1w1 : 1w0;
    }
    action no_uplink() {
        meta.has_uplink = 0;
        meta.downlink = (meta.downlink == 1
                         || (hdr.p4r.msg_type == MSG_REWIND && REWIND_AS_RESULT)) ? 1w1 : 1w0;
    }
    table uplink {
        key = { hdr.p4r.job: exact @name("job"); }
        actions = { set_uplink; no_uplink; }
        default_action = no_uplink();
        size = MAX_JOBS;
    }

    /* a RESULT with the round's values (or fingerprint range) is stored by a round that
     * holds none yet; one flagged STATE_LOST is only passed on */
    action take_result() {
        REGISTER_STEP(result_held, meta.slot_index, bit<1>, meta.result_was_held,
                      rv = value; value = 1;)
        meta.store_result = ~meta.result_was_held;
    }
    /* silent rounds: the next round's result is not held from now on -- a round none of
     * the leaf's ranks is in is complete here as soon as this result is stored (RankNext) */
    action await_next() {
        result_held.write(meta.slot_index ^ 1, 0);
    }

    apply {
        if (hdr.p4r.msg_type == MSG_RESULT || hdr.p4r.msg_type == MSG_STATUS) {
            meta.downlink = 1;
        }
        uplink.apply();

        if (meta.downlink == 1 && meta.from_uplink == 1 && hdr.p4r.msg_type != MSG_STATUS
                && (hdr.p4r.flags & FLAG_STATE_LOST) == 0) {
            take_result();
            if (meta.store_result == 1 && meta.round_mode == ROUND_MODE_SILENT) {
                await_next();
            }
        }
    }
}

/* What a leaf does with a round complete here (after the bitmap): the completing packet
 * goes up and the round holds no result yet; a retransmission finds out whether the
 * result is held (cached answer) or not (the partial goes up again). */
control LeafRound(inout headers_t hdr, inout metadata_t meta) {
    action round_completed() {
        result_held.write(meta.slot_index, 0);
        meta.send_up = 1;
    }
    action ask_held() {
        REGISTER_STEP(result_held, meta.slot_index, bit<1>, meta.result_was_held, READ_BODY)
        /* or a state probe: bit 2 from a worker of an every-rank job (FLAG_CACHED's the
         * other way; p4reduce.wire.Flag.PROBE; a silent job's DATA: COVERED) */
        meta.send_up = ~meta.result_was_held
                       | (hdr.p4r.flags[2:2] & ~meta.round_mode);
    }

    apply {
        if (meta.has_uplink == 1 && meta.state_lost == 0) {
            if (meta.complete == 1) {
                round_completed();
            } else if (meta.duplicate == 1 && meta.round_done == 1) {
                ask_held();
            }
        }
    }
}
/* The replica of a leaf's job group towards the uplink (rid UPLINK_REPLICA; the
 * controller adds it to a silent leaf job's group): every RESULT, STATUS or STATE_LOST the
 * leaf multicasts to its ranks makes one, and egress drops it -- except after the spine's
 * RESULT of a round whose next round has none of the leaf's ranks in it (RankNext:
 * leaf_empty). Then the replica becomes the leaf's part of that round: an empty DATA (its
 * ranks' bias in every lane of a packed job, zeros in a lanes job) of the next round's
 * block and version, announcing the leaf's minimum, from the leaf's rank to the spine, as
 * ValueAggregation stored it for a retransmission. A RESULT of an announce or rewind round
 * carries the fingerprint range, 4K - 8 bytes shorter than a DATA of K values, and
 * simple_switch lets a frame grow by 512 bytes (values.p4): above SKIP_GROWS_TO_VALUES
 * values per block the ranks' ANNOUNCEs carry a block after the range, and so do that
 * RESULT and this replica (parser.p4; ANNOUNCE_WITHOUT_BLOCK drops one without it), which
 * then shrinks by the range's 8 bytes. */
const bit<16> UPLINK_REPLICA = 0x100;

#define SIZE_EMPTY_VALUES(K)                                                   \
    action empty_values_##K() {                                                \
        hdr.values_##K.setValid();                                             \
        hdr.values_##K.word = EMPTY_PARTIAL_WORD;                              \
    }

control EmptyPartial(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    FOR_EACH_BLOCK_SIZE(SIZE_EMPTY_VALUES)

    action empty_partial() {
        hdr.p4r.msg_type = MSG_DATA;
        hdr.p4r.slot_version = ~hdr.p4r.slot_version;
        hdr.p4r.block = hdr.p4r.next_block;   /* the winner: the next round's block */
        hdr.p4r.next_block = (bit<32>)meta.partial_key[31:8];
        hdr.p4r.next_exponent = ~meta.partial_key[7:0];
        hdr.p4r.flags = FLAG_CONTINUED | FLAG_SILENT
                        | ((meta.encoding == ENCODING_PACKED) ? FLAG_PACKED : 7w0);
        INVALIDATE_VALUES
        hdr.fingerprint.setInvalid();
        hdr.round_status.setInvalid();
        ADDRESS_TO_UPLINK
        hdr.ipv4.total_len = IPV4_LEN_HEADER_ONLY + (meta.block_values << 2);
        hdr.udp.length = UDP_LEN_HEADER_ONLY + (meta.block_values << 2);
    }

    apply {
        if (meta.leaf_empty == 1) {
            empty_partial();
#define SIZE_ACTION empty_values
            CALL_FOR_JOB_SIZE
#undef SIZE_ACTION
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}
#endif
