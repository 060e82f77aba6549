// The in-step probe of results/2026-12-05-off-cache (not part of the build): why a collective inside
// a training step costs more than its sweep. Two ranks; each call's entry and exit on every rank by
// CLOCK_MONOTONIC (one host: comparable across processes), so a blocked call splits into the wait
// for the later peer (last entry - own entry) and the transfer (own exit - last entry).
// Variants, per call: hot (barrier, call on the same buffers: the sweep), rotate (barrier, call on
// the next of N buffer pairs filling SPAN MiB: --off-cache), evict (write SPAN MiB of scratch,
// barrier, call), cold-barrier (a GEMM of M x 3072 x 768 between calls, then a barrier: the
// compute's eviction without arrival skew), step (the GEMM, then the call: eviction and skew).
//   mpicxx -O2 -std=c++17 in_step_probe.cpp -o probe -lopenblas
//   mpirun -np 2 ./probe rs|ag|ar|iar VARIANT BYTES ITERS [M=512] [SPAN_MIB=256]
#include <mpi.h>
#include <cblas.h>
#include <time.h>
#include <vector>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
static double now_us(){ timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1e6+t.tv_nsec/1e3; }
static double median(std::vector<double> v){ std::sort(v.begin(),v.end()); return v[v.size()/2]; }
int main(int argc,char**argv){
  MPI_Init(&argc,&argv); int rank,size; MPI_Comm_rank(MPI_COMM_WORLD,&rank); MPI_Comm_size(MPI_COMM_WORLD,&size);
  std::string coll=argv[1]; std::string variant=argv[2]; size_t bytes=atol(argv[3]); int iters=atoi(argv[4]);
  int gm=argc>5?atoi(argv[5]):512; double rot_mb=argc>6?atof(argv[6]):256;
  size_t n=bytes/4; // full buffer elements (nccl-tests convention)
  int nbuf = variant=="rotate" ? std::max(1,(int)(rot_mb*1048576/(bytes*1.5))) : 1;
  std::vector<std::vector<float>> send(nbuf), recv(nbuf);
  for(int b=0;b<nbuf;++b){ send[b].assign(n,1.0f); recv[b].assign(n,0.0f);}
  int M=gm,N=768,K=768; std::vector<float> A(M*K,0.5f),B(K*N*4,0.25f),C(M*N*4,0.f);
  auto gemm=[&]{ cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,M,N*4,K,1.f,A.data(),K,B.data(),N*4,0.f,C.data(),N*4); };
  auto call=[&](int b){
    if(coll=="rs") MPI_Reduce_scatter_block(send[b].data(),recv[b].data(),(int)(n/size),MPI_FLOAT,MPI_SUM,MPI_COMM_WORLD);
    else if(coll=="iar"){ MPI_Request q; MPI_Iallreduce(send[b].data(),recv[b].data(),(int)n,MPI_FLOAT,MPI_SUM,MPI_COMM_WORLD,&q); MPI_Wait(&q,MPI_STATUS_IGNORE);}
    else if(coll=="ar") MPI_Allreduce(send[b].data(),recv[b].data(),(int)n,MPI_FLOAT,MPI_SUM,MPI_COMM_WORLD);
    else MPI_Allgather(send[b].data(),(int)(n/size),MPI_FLOAT,recv[b].data(),(int)(n/size),MPI_FLOAT,MPI_COMM_WORLD);
  };
  std::vector<char> scratch(variant=="evict"?(size_t)(rot_mb*1048576):0,1);
  std::vector<double> t0(iters),t1(iters),gt(iters);
  for(int w=0;w<3;++w){ gemm(); call(0);} MPI_Barrier(MPI_COMM_WORLD);
  for(int i=0;i<iters;++i){
    int b=i%nbuf;
    if(variant=="hot"||variant=="rotate"){ MPI_Barrier(MPI_COMM_WORLD); }
    else if(variant=="evict"){ double g=now_us(); memset(scratch.data(),i&0xff,scratch.size()); gt[i]=now_us()-g; MPI_Barrier(MPI_COMM_WORLD); }
    else { double g=now_us(); gemm(); gt[i]=now_us()-g; if(variant=="cold-barrier") MPI_Barrier(MPI_COMM_WORLD); }
    t0[i]=now_us(); call(b); t1[i]=now_us();
  }
  std::vector<double> a0(iters*size),a1(iters*size),ag(iters*size);
  MPI_Gather(t0.data(),iters,MPI_DOUBLE,a0.data(),iters,MPI_DOUBLE,0,MPI_COMM_WORLD);
  MPI_Gather(t1.data(),iters,MPI_DOUBLE,a1.data(),iters,MPI_DOUBLE,0,MPI_COMM_WORLD);
  MPI_Gather(gt.data(),iters,MPI_DOUBLE,ag.data(),iters,MPI_DOUBLE,0,MPI_COMM_WORLD);
  if(rank==0){
    std::vector<double> blocked,wait,transfer,g;
    for(int i=0;i<iters;++i){ double last=0; for(int r=0;r<size;++r) last=std::max(last,a0[r*iters+i]);
      for(int r=0;r<size;++r){ blocked.push_back(a1[r*iters+i]-a0[r*iters+i]); wait.push_back(last-a0[r*iters+i]); transfer.push_back(a1[r*iters+i]-last); g.push_back(ag[r*iters+i]); } }
    auto mean=[](const std::vector<double>&v){double s=0;for(double x:v)s+=x;return s/v.size();};
    printf("%s %s %zu B nbuf=%d: blocked mean %.1f med %.1f | peer-wait mean %.1f | transfer mean %.1f med %.1f | gemm med %.0f us\n",
      coll.c_str(),variant.c_str(),bytes,nbuf,mean(blocked),median(blocked),mean(wait),mean(transfer),median(transfer),median(g));
  }
  MPI_Finalize();
}
