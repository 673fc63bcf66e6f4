/* Result and replication: the packet that completes a round becomes the RESULT and is
 * multicast to the job's group (one replica per rank, rid = rank). A retransmission to a
 * completed round gets the stored result back by unicast (FLAG_CACHED). A duplicate of an
 * incomplete round and every other contribution are consumed here. */
#ifndef P4REDUCE_RESULT_P4
#define P4REDUCE_RESULT_P4
#include "headers.p4"

control Result(inout headers_t hdr, inout metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    counter(MAX_JOBS, CounterType.packets) aggregated;
    counter(MAX_JOBS, CounterType.packets) rounds_completed;
    counter(MAX_JOBS, CounterType.packets) retransmissions_served;
    counter(MAX_JOBS, CounterType.packets) duplicates;
    counter(MAX_JOBS, CounterType.packets) overflows;

    action make_result(bit<7> extra_flags) {
        meta.is_result = 1;
        hdr.p4r.msg_type = MSG_RESULT;
        hdr.p4r.next_block = (bit<32>)meta.next_key[31:8];
        hdr.p4r.next_exponent = ~meta.next_key[7:0];
        hdr.p4r.flags = extra_flags | ((meta.round_overflow == 1) ? FLAG_OVERFLOW : 7w0);
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
    }
    action set_lengths_with_values() {
        hdr.ipv4.total_len = IPV4_LEN_WITH_VALUES;
        hdr.udp.length = UDP_LEN_WITH_VALUES;
    }
    action set_lengths_header_only() {
        hdr.ipv4.total_len = IPV4_LEN_HEADER_ONLY;
        hdr.udp.length = UDP_LEN_HEADER_ONLY;
    }

    apply {
        bit<32> job = (bit<32>)meta.job_index;
        if (meta.complete == 1) {
            aggregated.count(job);
            rounds_completed.count(job);
            if (meta.round_overflow == 1) {
                overflows.count(job);
            }
            make_result(0);
            meta.multicast = 1;
            standard_metadata.mcast_grp = meta.mcast_grp;
        } else if (meta.duplicate == 1 && meta.round_done == 1) {
            retransmissions_served.count(job);
            make_result(FLAG_CACHED);
            meta.multicast = 0;
            meta.dest_rank = hdr.p4r.rank;
            standard_metadata.egress_spec = standard_metadata.ingress_port;
        } else {
            if (meta.duplicate == 1) {
                duplicates.count(job);
            } else {
                aggregated.count(job);
            }
            mark_to_drop(standard_metadata);
        }
        if (meta.is_result == 1) {
            if (hdr.values.isValid()) {
                set_lengths_with_values();
            } else {
                set_lengths_header_only();
            }
        }
    }
}

/* Egress: each result copy is addressed to its rank (rid of the multicast replica, or the
 * requester for a cached result). */
control ResultDestination(inout headers_t hdr, inout metadata_t meta,
                          inout standard_metadata_t standard_metadata) {
    action set_destination(bit<48> mac, bit<32> ip, bit<16> udp_port) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        hdr.udp.dst_port = udp_port;
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
        size = 4096;
    }

    apply {
        if (meta.multicast == 1) {
            meta.dest_rank = standard_metadata.egress_rid[7:0];
        }
        hdr.p4r.rank = meta.dest_rank;
        hdr.ethernet.src_addr = meta.switch_mac;
        hdr.ipv4.src_addr = meta.switch_ip;
        hdr.udp.src_port = P4REDUCE_UDP_BASE;
        result_destination.apply();
    }
}
#endif
