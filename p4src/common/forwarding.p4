/* Plain forwarding: an ARP responder for the switch's IP (identity.p4) and L2 forwarding,
 * so ARP, ping and control traffic between hosts still flow. One source for both
 * architectures (arch.p4 names ports, drops and counters); the only difference is how the
 * ARP target is compared with the switch's IP (P4REDUCE_GATEWAY_COMPARES_FIELDS). */
#ifndef P4REDUCE_FORWARDING_P4
#define P4REDUCE_FORWARDING_P4
#include "headers.p4"

control Forwarding(inout headers_t hdr, inout metadata_t meta, INGRESS_INTRINSIC_PARAMS) {
    action forward(PortId_t port) {
        SEND_TO_PORT(port);
    }
    action flood(MulticastGroupId_t group) {
        FLOOD_TO_GROUP(group);
    }
    PACKET_COUNTER(bit<32>, 1, unrouted);

    action drop() {
        COUNT(unrouted, 0);
        DROP_PACKET();
    }
    table l2_forward {
        key = { hdr.ethernet.dst_addr: exact @name("dst_mac"); }
        actions = { forward; flood; drop; }
        default_action = drop();
        size = L2_ENTRIES;
    }

    /* the reply leaves by the request's port */
    action answer_arp() {
        hdr.ethernet.dst_addr = hdr.arp.sha;
        hdr.ethernet.src_addr = meta.switch_mac;
        hdr.arp.oper = ARP_OPER_REPLY;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.sha = meta.switch_mac;
        hdr.arp.spa = meta.switch_ip;
        SEND_TO_PORT(INGRESS_PORT);
    }

#if P4REDUCE_GATEWAY_COMPARES_FIELDS
    apply {
        if (hdr.arp.isValid() && hdr.arp.oper == ARP_OPER_REQUEST && meta.switch_ip != 0
                && hdr.arp.tpa == meta.switch_ip) {
            answer_arp();
        } else {
            l2_forward.apply();
        }
    }
#else
    ipv4_addr_t tpa_diff;
    action compare_tpa() {
        tpa_diff = hdr.arp.tpa ^ meta.switch_ip;
    }
    bit<1> for_me;

    apply {
        compare_tpa();
        for_me = 0;
        if (hdr.arp.isValid() && hdr.arp.oper == ARP_OPER_REQUEST) {  /* one gateway each */
            if (tpa_diff == 0) {
                if (meta.switch_ip != 0) {
                    for_me = 1;
                }
            }
        }
        if (for_me == 1) {
            answer_arp();
        } else {
            l2_forward.apply();
        }
    }
#endif
}
#endif
