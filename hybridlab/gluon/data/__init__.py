"""MXNet's ``gluon.data``: datasets, samplers and the DataLoader (see each module).

``dataset.py`` (what a sample is), ``sampler.py`` (which samples, in which batches),
``dataloader.py`` (batches, in this process or in worker processes).
"""

from hybridlab.gluon.data import dataloader, dataset, sampler
from hybridlab.gluon.data.dataloader import DataLoader
from hybridlab.gluon.data.dataset import (
    ArrayDataset,
    Dataset,
    RecordFileDataset,
    SimpleDataset,
    load_digits,
)
from hybridlab.gluon.data.sampler import (
    BatchSampler,
    FilterSampler,
    IntervalSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
)
