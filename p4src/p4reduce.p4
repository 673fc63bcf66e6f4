/* p4reduce: in-network sparse allreduce for v1model (bmv2 simple_switch_grpc).
 * One control per concern; docs/protocol.md is the specification this program implements. */
#include <core.p4>
#include <v1model.p4>
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/admission.p4"
#include "include/drop_simulator.p4"
#include "include/contributor_bitmap.p4"
#include "include/round_counter.p4"
#include "include/value_aggregation.p4"
#include "include/next_block.p4"
#include "include/result.p4"
#include "include/forwarding.p4"

control P4ReduceIngress(inout headers_t hdr, inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    counter(DROP_REASONS, CounterType.packets) drops;

    SwitchIdentity() identity;
    Admission() admission;
    DropSimulator() drop_simulator;
    ContributorBitmap() contributor_bitmap;
    RoundCounter() round_counter;
    ValueAggregation() value_aggregation;
    NextBlock() next_block;
    Result() result;
    Forwarding() forwarding;

    action drop_counted(bit<32> reason) {
        drops.count(reason);
        mark_to_drop(standard_metadata);
    }

    apply {
        meta.is_result = 0;
        meta.multicast = 0;
        identity.apply(hdr, meta);
        if (standard_metadata.parser_error != error.NoError
                || standard_metadata.checksum_error == 1) {
            drop_counted(DROP_MALFORMED);
        } else if (hdr.p4r.isValid() && hdr.ipv4.dst_addr == meta.switch_ip) {
            if (hdr.p4r.protocol != PROTOCOL_VERSION
                    || hdr.p4r.msg_type == 0 || hdr.p4r.msg_type > MSG_SKIP
                    || hdr.p4r.next_block[31:24] != 0) {
                drop_counted(DROP_MALFORMED);
            } else {
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
                        contributor_bitmap.apply(hdr, meta);
                        round_counter.apply(hdr, meta);
                        /* a duplicate of an incomplete round only gets counted and dropped */
                        if (meta.duplicate == 0 || meta.round_done == 1) {
                            value_aggregation.apply(hdr, meta);
                            next_block.apply(hdr, meta);
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

    apply {
        if (meta.is_result == 1) {
            result_destination.apply(hdr, meta, standard_metadata);
            drop_simulator_egress.apply(hdr, meta, standard_metadata);
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
