"""What the benchmark scripts share (none of it runs on its own).

``harness`` (fresh processes, interleaved rounds, medians with ranges,
results filed by benchmark), ``corpora`` (the corpus, its caches and the
test streams), ``workloads`` (the requests the benchmarks draft for),
``edits`` (real edits from released packages), ``drafters`` (every drafter
and peer behind one teacher-forcing interface, and the ceilings) and
``peers`` (building the peers that need building). A script imports these,
never another script.
"""
