"""Seeded workload generators; each returns a validated :class:`~mapsched.Problem`."""

from mapsched.generators.costs import PRESETS as SYSTEMS
from mapsched.generators.costs import DeviceProfile, Platform, cpu_t4_a100, gpu_server, multi_node, platform
from mapsched.generators.doppler import chainmm, ffnn, identical_gpus, llama_block, llama_layer
from mapsched.generators.giph import (
    GIPH_SETS,
    GiphChange,
    GiphExperiment,
    GiphGraph,
    GiphNetwork,
    giph_adapt,
    giph_experiment,
    giph_graph,
    giph_initial,
    giph_instance,
    giph_network,
    giph_problem,
)
from mapsched.generators.networks import gpt3, inception, resnet, transformer, vgg
from mapsched.generators.random_dag import random_dag
from mapsched.generators.random_wired import module_graph, random_wired, stack
from mapsched.generators.training import transformer_train

__all__ = [
    "GIPH_SETS", "SYSTEMS", "DeviceProfile", "GiphChange", "GiphExperiment", "GiphGraph", "GiphNetwork",
    "Platform", "chainmm", "cpu_t4_a100", "ffnn", "giph_adapt", "giph_experiment",
    "giph_graph", "giph_initial", "giph_instance", "giph_network", "giph_problem", "gpt3", "gpu_server",
    "identical_gpus", "inception", "llama_block", "llama_layer", "module_graph", "multi_node", "platform",
    "random_dag", "random_wired", "resnet", "stack", "transformer", "transformer_train", "vgg",
]
