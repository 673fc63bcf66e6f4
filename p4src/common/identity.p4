/* Switch identity: the switch's own MAC/IP -- the address workers send p4reduce packets to,
 * the source of results, and what the ARP responder answers for. The same on every
 * architecture. */
#ifndef P4REDUCE_IDENTITY_P4
#define P4REDUCE_IDENTITY_P4
#include "headers.p4"

control SwitchIdentity(inout headers_t hdr, inout metadata_t meta) {
    action set_identity(mac_t mac, ipv4_addr_t ip) {
        meta.switch_mac = mac;
        meta.switch_ip = ip;
    }
    table switch_identity {
        actions = { set_identity; }
        default_action = set_identity(0, 0);
    }
    apply {
        switch_identity.apply();
    }
}
#endif
