/* Result and replication: the packet that completes a round becomes the RESULT and is
 * multicast to the job's group (one replica per rank, rid = rank). A retransmission to a
 * completed round gets the stored result back by unicast (FLAG_CACHED); one to an
 * incomplete round gets a STATUS back (the ranks that have contributed), so a waiting rank
 * knows its packet arrived and whom the round waits for. A packet on a slot that lost the
 * job's state gets FLAG_STATE_LOST back; a contribution no round can take (stale) is
 * dropped and counted. Every other contribution is consumed here.
 *
 * Silent rounds: a round whose completion applied a pending rewind leaves as MSG_REWIND
 * (its cached copies too: meta.rewound), a query is answered as a retransmission is
 * (ContributorBitmap chose which round), a REWIND request that is no closing contribution
 * is consumed (Rewind counts it), and everything the switch sends carries FLAG_SILENT. */
#ifndef P4REDUCE_RESULT_P4
#define P4REDUCE_RESULT_P4
#include "../common/headers.p4"
#include "repair_mark.p4"
#include "uplink.p4"   /* ADDRESS_TO_UPLINK */

/* what every packet the switch sends for a job of silent rounds carries */
#define SILENT_FLAG ((meta.round_mode == ROUND_MODE_SILENT) ? FLAG_SILENT : 7w0)

control Result(inout headers_t hdr, inout metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    counter(MAX_JOBS, CounterType.packets) aggregated;
    counter(MAX_JOBS, CounterType.packets) rounds_completed;
    counter(MAX_JOBS, CounterType.packets) retransmissions_served;
    counter(MAX_JOBS, CounterType.packets) duplicates;
    counter(MAX_JOBS, CounterType.packets) overflows;
    counter(MAX_JOBS, CounterType.packets) state_lost;
    counter(MAX_JOBS, CounterType.packets) stale;

    action make_result(bit<7> extra_flags) {
        meta.to_worker = 1;
        hdr.p4r.msg_type = (meta.rewound == 1) ? MSG_REWIND : MSG_RESULT;
        hdr.p4r.next_block = (bit<32>)meta.next_key[31:8];
        hdr.p4r.next_exponent = ~meta.next_key[7:0];
        hdr.p4r.flags = extra_flags | ((meta.round_overflow == 1) ? FLAG_OVERFLOW : 7w0)
                        | ((meta.encoding == ENCODING_PACKED) ? FLAG_PACKED : 7w0)
                        | SILENT_FLAG | ((meta.ended == 1) ? FLAG_ENDED : 7w0)
                        | ((meta.repaired == 1) ? FLAG_REPAIRED : 7w0);
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
    }
    action make_status() {
        meta.to_worker = 1;
        hdr.p4r.msg_type = MSG_STATUS;
        /* the job's encoding stays: a leaf admits the spine's STATUS by it */
        hdr.p4r.flags = SILENT_FLAG | ((meta.encoding == ENCODING_PACKED) ? FLAG_PACKED : 7w0);
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        INVALIDATE_VALUES
        hdr.fingerprint.setInvalid();
        hdr.round_status.setValid();
        hdr.round_status.contributors = meta.contributors;
    }
    action make_state_lost() {
        meta.to_worker = 1;
        hdr.p4r.msg_type = MSG_RESULT;
        /* the job's encoding stays too: a leaf admits the spine's STATE_LOST by it */
        hdr.p4r.flags = FLAG_STATE_LOST | SILENT_FLAG
                        | ((meta.encoding == ENCODING_PACKED) ? FLAG_PACKED : 7w0);
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        INVALIDATE_VALUES
        hdr.fingerprint.setInvalid();
    }
    /* from this leaf to the spine, as its rank there */
    action address_up() {
        ADDRESS_TO_UPLINK
        standard_metadata.egress_spec = meta.uplink_port;
    }
    /* a leaf's round (uplink.p4): the completing packet, or a retransmission finding no
     * result held, goes up as the leaf's contribution to the spine's round -- its values
     * the leaf's sums, its next block the leaf's minimum, its fingerprint the leaf's range,
     * its rank the leaf's in the spine's job */
    action make_partial(flags_t extra_flags) {
        meta.send_up = 1;   /* the lengths are set below, as for a packet to a worker */
        /* silent rounds: a closing partial that took a REWIND is one (RankNext); a DATA
         * partial is COVERED when every rank of the leaf sent a COVERED DATA */
        hdr.p4r.msg_type = (meta.rewound == 1) ? MSG_REWIND
                         : (hdr.fingerprint.isValid() ? MSG_ANNOUNCE
                            : (ANY_VALUES_VALID ? MSG_DATA : MSG_SKIP));
        hdr.p4r.next_block = (bit<32>)meta.next_key[31:8];
        hdr.p4r.next_exponent = ~meta.next_key[7:0];
        hdr.p4r.flags = extra_flags | ((meta.round_overflow == 1) ? FLAG_OVERFLOW : 7w0)
                        | (hdr.p4r.flags & (FLAG_CONTINUED | FLAG_PACKED | FLAG_SILENT))
                        | ((meta.partial_covered == 1 && hdr.p4r.msg_type == MSG_DATA)
                           ? FLAG_COVERED : 7w0);
        address_up();
    }
    /* silent rounds: a rank's REWIND request, as this leaf's (ContributorBitmap) */
    action relay_request() {
        meta.send_up = 1;
        address_up();
    }
    /* the spine's RESULT (stored by the round, or STATE_LOST) goes to the leaf's ranks */
    action pass_down() {
        meta.to_worker = 1;
        meta.multicast = 1;
        standard_metadata.mcast_grp = meta.mcast_grp;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
    }
    action reply_to_sender() {
        meta.multicast = 0;
        meta.dest_rank = hdr.p4r.rank;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
    /* The three answers as one action each (counter, message, destination): bmv2 pays
     * per table, and each statement of a control's body is one. */
    action multicast_result() {
        aggregated.count((bit<32>)meta.job_index);
        rounds_completed.count((bit<32>)meta.job_index);
        make_result(0);
        meta.multicast = 1;
        standard_metadata.mcast_grp = meta.mcast_grp;
    }
    action serve_cached_result() {
        retransmissions_served.count((bit<32>)meta.job_index);
        make_result(FLAG_CACHED);
        reply_to_sender();
    }
    action answer_status() {
        duplicates.count((bit<32>)meta.job_index);
        make_status();
        reply_to_sender();
    }
    /* a leaf (uplink.p4): its STATUS goes to every one of its ranks, not only the asker:
     * each that contributed learns that the round waits and stops asking; one its
     * bitmap lacks learns that its packet was lost and sends it again at once. In silent
     * rounds it goes to the asker and the ranks the round expects, and egress drops the
     * other copies (meta.status_to_round): a rank that sits the round out may have
     * missed the rounds since its last packet, so it cannot tell another round of the
     * same version and block from its own (a closing round from the call's announce
     * round), and a STATUS it did not ask for would keep it from asking for a rewind; a
     * rank the round expects sent its packet for this very round, or takes the STATUS
     * for no packet of its own (another version or block) and ignores it. */
    action status_to_ranks() {
        duplicates.count((bit<32>)meta.job_index);
        make_status();
        meta.multicast = 1;
        standard_metadata.mcast_grp = meta.mcast_grp;
        meta.status_to_round = meta.round_mode;
    }
    /* a RESULT with values carries the job's K values: 62 + 4K bytes; after the
     * fingerprint range (an announce round's answer made from a packet with a block,
     * above SKIP_GROWS_TO_VALUES: ContributorBitmap) 70 + 4K */
    action set_lengths_with_values() {
        bit<16> extension = (meta.block_values << 2)
                            + (hdr.fingerprint.isValid() ? 16w8 : 16w0);
        hdr.ipv4.total_len = IPV4_LEN_HEADER_ONLY + extension;
        hdr.udp.length = UDP_LEN_HEADER_ONLY + extension;
    }
    action set_lengths_with_fingerprint() {
        hdr.ipv4.total_len = IPV4_LEN_WITH_FINGERPRINT;
        hdr.udp.length = UDP_LEN_WITH_FINGERPRINT;
    }
    action set_lengths_with_status() {
        hdr.ipv4.total_len = IPV4_LEN_WITH_STATUS;
        hdr.udp.length = UDP_LEN_WITH_STATUS;
    }
    action set_lengths_header_only() {
        hdr.ipv4.total_len = IPV4_LEN_HEADER_ONLY;
        hdr.udp.length = UDP_LEN_HEADER_ONLY;
    }

    apply {
        if (meta.downlink == 1) {
            /* from the spine: a RESULT the round stores, or STATE_LOST, goes to the ranks;
             * so does a STATUS (the round is complete here and waits for the spine: every
             * rank of this leaf is told so, FLAG_RELAYED, and stops asking); a RESULT the
             * round already holds ends here. Tested before state_lost: the spine's
             * STATE_LOST, which ContributorBitmap has just marked at this leaf too, goes
             * down to the ranks, not up again */
            if (meta.store_result == 1 || (hdr.p4r.flags & FLAG_STATE_LOST) != 0) {
                pass_down();
            } else if (hdr.p4r.msg_type == MSG_STATUS) {
                pass_down();
                hdr.p4r.flags = hdr.p4r.flags | FLAG_RELAYED;
            } else if (meta.round_mode == ROUND_MODE_SILENT
                       && (hdr.p4r.flags & FLAG_CACHED) != 0) {
                /* silent rounds: the spine's answer to a REWIND request this leaf
                 * relayed (ContributorBitmap) is the asking rank's, as a switch answers
                 * one itself: the last completed round, which this leaf holds already */
                pass_down();
            } else {
                duplicates.count((bit<32>)meta.job_index);
                mark_to_drop(standard_metadata);
            }
        } else if (meta.state_lost == 1) {
            state_lost.count((bit<32>)meta.job_index);
            if (meta.has_uplink == 1 && meta.incarnation_lost == 0) {
                /* a leaf that found the slot lost itself: the spine marks the slot lost
                 * and tells every leaf's ranks. (A job admitted lost is lost on every
                 * switch of it, controlplane.fabric.spread_lost: its leaf answers the
                 * rank itself, as below, instead of one job-wide answer per packet.) */
                make_partial(FLAG_STATE_LOST);
            } else if (hdr.p4r.flags[4:4] == 1) {
                /* a leaf's STATE_LOST: every leaf hears it */
                make_state_lost();
                meta.multicast = 1;
                standard_metadata.mcast_grp = meta.mcast_grp;
            } else {
                make_state_lost();
                reply_to_sender();
            }
        } else if (meta.send_up == 1) {
            if (meta.complete == 1) {
                aggregated.count((bit<32>)meta.job_index);
                rounds_completed.count((bit<32>)meta.job_index);
                make_partial(0);
            } else {
                retransmissions_served.count((bit<32>)meta.job_index);
                make_partial(FLAG_RETRANSMIT);
            }
        } else if (meta.complete == 1) {
            multicast_result();
            if (meta.round_overflow == 1) {
                overflows.count((bit<32>)meta.job_index);
            }
        } else if (meta.duplicate == 1 && meta.round_done == 1 && meta.data_values == 0
                   && !hdr.fingerprint.isValid() && meta.closing_answer == 0
                   && meta.block_values > SKIP_GROWS_TO_VALUES) {
            /* a header-only copy (a late ANNOUNCE or closing SKIP of a silent job) whose
             * half now holds a data round of more than SKIP_GROWS_TO_VALUES values:
             * simple_switch cannot grow a received frame by that much. Ended as stale;
             * the sender's queries, which carry the block, get the result (silent
             * rounds, protocol.md 13). */
            stale.count((bit<32>)meta.job_index);
            mark_to_drop(standard_metadata);
        } else if (meta.duplicate == 1 && meta.round_done == 1) {
            serve_cached_result();
        } else if (meta.duplicate == 1 && meta.has_uplink == 1) {
            status_to_ranks();
        } else if (meta.duplicate == 1) {
            answer_status();
        } else if (meta.rewind_only == 1) {
            if (meta.relay_up == 1) {
                relay_request();   /* a silent leaf's: sent up as its own */
            } else {
                mark_to_drop(standard_metadata);   /* counted by Rewind */
            }
        } else if (meta.stale == 1) {
            stale.count((bit<32>)meta.job_index);
            mark_to_drop(standard_metadata);
        } else {
            aggregated.count((bit<32>)meta.job_index);
            mark_to_drop(standard_metadata);
        }
        if (meta.to_worker == 1 || meta.send_up == 1) {
            if ANY_VALUES_VALID {
                set_lengths_with_values();
            } else if (hdr.fingerprint.isValid()) {
                set_lengths_with_fingerprint();
            } else if (hdr.round_status.isValid()) {
                set_lengths_with_status();
            } else {
                set_lengths_header_only();
            }
        }
    }
}
#endif
