import ObsCore
