/* Candidate "stack": the block is a header stack of CHUNKS bit<2048> chunks, parsed by a
 * loop (a counter in metadata), and one register array holds every slot's CHUNKS cells (slot x CHUNKS + chunk):
 * CHUNKS read-add-writes per packet as in "chunks", one register object and one parser
 * state instead of CHUNKS of each. */
#include "headers.p4"
#include "chunk_list.p4"

header chunk_t { bit<2048> word; }

struct headers_t {
    ethernet_t       eth;
    block_t          block;
    chunk_t[CHUNKS]  chunks;
}

#include "controls.p4"

parser WideParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            ETHERTYPE_BLOCK: block;
            default: accept;
        }
    }
    state block {
        pkt.extract(hdr.block);
        meta.chunks_left = CHUNKS;
        transition chunk;
    }
    state chunk {
        pkt.extract(hdr.chunks.next);
        meta.chunks_left = meta.chunks_left - 1;
        transition select(meta.chunks_left) {
            0: accept;
            default: chunk;
        }
    }
}

control WideIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    register<bit<2048>>(SLOTS * CHUNKS) sums;

    /* per chunk: read, add into the header (the sum goes out in it), write it back;
     * the cell index slot x CHUNKS + i is an expression p4c computes into a temporary */
    action add() {
        bit<2048> stored;
#define STACK_ADD(i)                                                           \
        sums.read(stored, meta.slot_index + i);                                \
        hdr.chunks[i].word = (hdr.block.first == 1) ? hdr.chunks[i].word       \
                                                    : stored + hdr.chunks[i].word; \
        sums.write(meta.slot_index + i, hdr.chunks[i].word);
        FOR_EACH_CHUNK(STACK_ADD)
    }

    apply {
        if (hdr.block.isValid()) {
            meta.slot_index = (bit<32>)hdr.block.slot * CHUNKS;
            add();
        }
        WIDE_FORWARD(standard_metadata)
    }
}

WIDE_MAIN(WideParser, WideIngress)
