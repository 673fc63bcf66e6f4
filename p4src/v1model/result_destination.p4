/* Result destination (egress): every packet going back to workers is addressed to its
 * rank -- the rid of a multicast replica, or the sender of a packet answered by unicast. */
#ifndef P4REDUCE_RESULT_DESTINATION_P4
#define P4REDUCE_RESULT_DESTINATION_P4
#include "../common/headers.p4"

control ResultDestination(inout headers_t hdr, inout metadata_t meta,
                          inout standard_metadata_t standard_metadata) {
    action set_destination(bit<48> mac, bit<32> ip, bit<16> udp_port) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        hdr.udp.dst_port = udp_port;
        /* the source is the switch; in the action, as bmv2 pays per table applied */
        hdr.p4r.rank = meta.dest_rank;
        hdr.ethernet.src_addr = meta.switch_mac;
        hdr.ipv4.src_addr = meta.switch_ip;
        hdr.udp.src_port = P4REDUCE_UDP_BASE;
    }
    counter(1, CounterType.packets) no_destination_drops;

    action no_destination() {
        no_destination_drops.count(0);
        mark_to_drop(standard_metadata);
    }
    table result_destination {
        key = {
            hdr.p4r.job: exact @name("job");
            meta.dest_rank: exact @name("rank");
        }
        actions = { set_destination; no_destination; }
        default_action = no_destination();
        size = RESULT_DESTINATION_ENTRIES;
    }

    apply {
        if (meta.multicast == 1) {
            meta.dest_rank = standard_metadata.egress_rid[7:0];
        }
        result_destination.apply();
    }
}
#endif
