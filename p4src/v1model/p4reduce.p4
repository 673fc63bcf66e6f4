/* p4reduce: in-network sparse allreduce for v1model (bmv2 simple_switch_grpc, softswitch).
 * One control per concern; docs/protocol.md is the specification this program implements.
 * Headers, constants and the register-action bodies are shared with the TNA program
 * (../common/, ../tna/). */
#include "arch.p4"
#include "values.p4"   /* one values header per block size, before the shared headers */
#include "../common/headers.p4"
#include "parser.p4"
#include "../common/identity.p4"
#include "validation.p4"
#include "../common/admission.p4"
#include "drop_simulator.p4"
#include "contributor_bitmap.p4"
#include "fingerprint.p4"
#include "value_aggregation.p4"
#include "next_block.p4"
#include "expected_ranks.p4"
#include "rank_next.p4"
#include "silent_spine.p4"
#include "uplink.p4"
#include "repair_mark.p4"
#include "result.p4"
#include "../common/result_destination.p4"
#include "../common/forwarding.p4"

control P4ReduceIngress(inout headers_t hdr, inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    counter(DROP_REASONS, CounterType.packets) drops;

    SwitchIdentity() identity;
    Validation() validation;
    Admission() admission;
    DropSimulator() drop_simulator;
    ContributorBitmap() contributor_bitmap;
    Fingerprint() fingerprint;
    ValueAggregation() value_aggregation;
    RoundWinner() round_winner;
    NextBlock() next_block;
    ExpectedRanks() expected_ranks;
    RankNext() rank_next;
    SilentSpine() silent_spine;
    Uplink() uplink;
    LeafRound() leaf_round;
    RepairMark() repair_mark;
    Result() result;
    Forwarding() forwarding;

    action drop_counted(bit<32> reason) {
        drops.count(reason);
        mark_to_drop(standard_metadata);
    }

    apply {
        /* v1model starts every packet from a port with user metadata zeroed (bmv2 and
         * softswitch do; docs/benchmarks.md counts what a per-packet init would cost) */
        identity.apply(hdr, meta);
        validation.apply(hdr, meta, standard_metadata);
        if (meta.malformed == 1) {
            drop_counted(DROP_MALFORMED);
        } else if (hdr.p4r.isValid() && hdr.ipv4.dst_addr == meta.switch_ip) {
            admission.apply(hdr, meta, standard_metadata);
            if (meta.admitted == 0) {
                drop_counted(DROP_UNADMITTED);
            } else if (meta.slot_in_range == 0) {
                mark_to_drop(standard_metadata);   /* counted per job by admission */
            } else {
                drop_simulator.apply(hdr, meta, standard_metadata);
                if (meta.sim_drop == 1) {
                    mark_to_drop(standard_metadata);
                } else {
                    uplink.apply(hdr, meta, standard_metadata);   /* a leaf's job? */
                    if ((meta.downlink == 1 && meta.from_uplink == 0) || meta.malformed == 1) {
                        /* only a spine sends these (Uplink: a REWIND with a RESULT's
                         * layout too); or a leaf's ANNOUNCE without its block (Uplink) */
                        drop_counted(DROP_MALFORMED);
                    } else {
                        /* the bitmap's three callers, decided before any of them runs:
                         * it is applied in one place, as p4c copies a control (and each
                         * of its actions, the wide ones too) into every call site */
                        bool contribution = meta.downlink == 0;
                        /* the spine's STATE_LOST: lost at this leaf too */
                        bool lost_above = meta.downlink == 1 && hdr.p4r.flags[4:4] == 1;
                        /* a silent leaf: the spine's winner, the next round's expected
                         * ranks here, then the halves for that round */
                        bool silent_result = !contribution && !lost_above
                                             && meta.store_result == 1
                                             && meta.round_mode == ROUND_MODE_SILENT;
                        if (contribution) {
                            round_winner.apply(hdr, meta);    /* the block a new contribution must carry */
                            if (meta.round_mode == ROUND_MODE_SILENT) {
                                expected_ranks.apply(hdr, meta);   /* whom the round waits for */
                            }
                        } else if (silent_result) {
                            rank_next.apply(hdr, meta);
                        }
                        if (contribution || lost_above || silent_result) {
                            contributor_bitmap.apply(hdr, meta);   /* silent: and Rewind */
                        }
                        if (contribution) {
                            repair_mark.apply(hdr, meta);
                            leaf_round.apply(hdr, meta);
                            if (meta.complete == 1 && meta.round_mode == ROUND_MODE_SILENT
                                && meta.has_uplink == 0) {
                                silent_spine.apply(hdr, meta);   /* a spine's job? */
                            }
                        }
                        /* a duplicate of an incomplete round only gets a STATUS back, a
                         * stale contribution or a consumed REWIND request nothing; a
                         * spine's RESULT is stored as the round's (uplink.p4) */
                        if (meta.store_result == 1
                            || (meta.downlink == 0 && meta.state_lost == 0 && meta.stale == 0
                                && meta.rewind_only == 0
                                && (meta.duplicate == 0 || meta.round_done == 1))) {
                            fingerprint.apply(hdr, meta);
                            value_aggregation.apply(hdr, meta);
                            if (meta.round_mode == ROUND_MODE_SILENT
                                && meta.store_result == 0) {
                                rank_next.apply(hdr, meta);
                            } else if (meta.round_mode != ROUND_MODE_SILENT) {
                                next_block.apply(hdr, meta);
                            }
                        }
                        result.apply(hdr, meta, standard_metadata);
                    }
                }
            }
        } else {
            forwarding.apply(hdr, meta, standard_metadata);
        }
    }
}

control P4ReduceEgress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    ResultDestination() result_destination;
    DropSimulatorEgress() drop_simulator_egress;
    EmptyPartial() empty_partial;

    apply {
        if (meta.to_worker == 1) {
            if (standard_metadata.egress_rid == UPLINK_REPLICA) {
                empty_partial.apply(hdr, meta, standard_metadata);   /* a silent leaf's */
            } else if (meta.status_to_round == 1
                       && (((meta.unexpected & ~meta.rank_bit)
                            >> standard_metadata.egress_rid[7:0]) & 1) == 1) {
                /* a silent leaf's STATUS (Result) goes to the asker and the ranks its
                 * round expects, not to a rank that sits the round out */
                mark_to_drop(standard_metadata);
            } else {
                result_destination.apply(hdr, meta, standard_metadata);
                drop_simulator_egress.apply(hdr, meta, standard_metadata);
            }
        } else if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_REPLICATION
                   && standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);   /* a flooded frame does not go back */
        }
    }
}

V1Switch(P4ReduceParser(),
         P4ReduceVerifyChecksum(),
         P4ReduceIngress(),
         P4ReduceEgress(),
         P4ReduceComputeChecksum(),
         P4ReduceDeparser()) main;
