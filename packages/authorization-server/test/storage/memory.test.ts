import { layerMemory } from "../../src/storage/index.js"
import { storageContract } from "./contract.js"

storageContract("memory", () => layerMemory)
