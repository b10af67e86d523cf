/*
 * megakernel_hopper.cu -- the persistent megakernel running the Hopper Atom on the
 * throughput path (one file per Atom so that their instantiations compile
 * in parallel).
 */
#include "persistent/megakernel.cuh"

void (*purlinMegakernelHopper(void))(purlinDevComm_t*) { return purlinMegakernel<purlinAtomHopperT>; }
