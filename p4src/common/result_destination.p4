/* Result destination (egress): every packet going back to workers is addressed to its
 * rank -- the rid of a multicast replica, or the sender of a packet answered by unicast.
 * Where egress finds ingress's decisions is the architecture's (EGRESS_DEST_RANK,
 * EGRESS_MULTICAST: user metadata on v1model, the bridge header on TNA), and so is where
 * the source addresses are written (P4REDUCE_EGRESS_WRITES_SOURCE: in the action on
 * v1model, as bmv2 pays per table applied; on TNA ingress writes the switch's addresses
 * once for all copies, since bridging them cost 80 bits of PHV the value lanes need). */
#ifndef P4REDUCE_RESULT_DESTINATION_P4
#define P4REDUCE_RESULT_DESTINATION_P4
#include "headers.p4"

control ResultDestination(inout headers_t hdr, inout metadata_t meta, EGRESS_INTRINSIC_PARAMS) {
    action set_destination(mac_t mac, ipv4_addr_t ip, udp_port_t udp_port) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        hdr.udp.dst_port = udp_port;
#if P4REDUCE_EGRESS_WRITES_SOURCE
        hdr.p4r.rank = EGRESS_DEST_RANK;
        hdr.ethernet.src_addr = meta.switch_mac;
        hdr.ipv4.src_addr = meta.switch_ip;
        hdr.udp.src_port = P4REDUCE_UDP_BASE;
#endif
    }
    PACKET_COUNTER(bit<32>, 1, no_destination_drops);

    action no_destination() {
        COUNT(no_destination_drops, 0);
        EGRESS_DROP_PACKET();
    }
    table result_destination {
        key = {
            hdr.p4r.job: exact @name("job");
            EGRESS_DEST_RANK: exact @name("rank");
        }
        actions = { set_destination; no_destination; }
        default_action = no_destination();
        size = RESULT_DESTINATION_ENTRIES;
    }

    apply {
        if (EGRESS_MULTICAST == 1) {
            EGRESS_DEST_RANK = EGRESS_RID[7:0];
        }
#if !P4REDUCE_EGRESS_WRITES_SOURCE
        hdr.p4r.rank = EGRESS_DEST_RANK;
        hdr.udp.src_port = P4REDUCE_UDP_BASE;
#endif
        result_destination.apply();
    }
}
#endif
