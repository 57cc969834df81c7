// What a large virtual map costs LMDB: open, one read, one durable write, close, N times, for a map
// of S GiB. Build and run: gcc -O2 mapsize.c -o mapsize -llmdb && mkdir d && ./mapsize 64 d 300
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  size_t size=strtoull(argv[1],0,10)<<30; const char*dir=argv[2]; int n=atoi(argv[3]);
  double t0=now();
  for(int i=0;i<n;i++){MDB_env*e;mdb_env_create(&e);mdb_env_set_maxdbs(e,64);mdb_env_set_mapsize(e,size);
    if(mdb_env_open(e,dir,MDB_NOTLS,0644)){printf("open failed\n");return 1;}
    MDB_txn*t;mdb_txn_begin(e,0,MDB_RDONLY,&t);mdb_txn_abort(t);
    MDB_txn*w;mdb_txn_begin(e,0,0,&w);MDB_dbi d;mdb_dbi_open(w,"x",MDB_CREATE,&d);
    MDB_val k={4,"key1"},v={4,"val1"};mdb_put(w,d,&k,&v,0);mdb_txn_commit(w);
    mdb_env_close(e);}
  double t1=now();
  struct rusage ru;getrusage(RUSAGE_SELF,&ru);
  printf("map %s GiB: %.1f us per open+read+write+close, maxrss %ld KiB\n",argv[1],(t1-t0)/n*1e6,ru.ru_maxrss);
}
