// The image an agent runs, chosen and checked on this host's engine when the agent is created
// or changed: the image it names, or else the agent image of its recipe (its provider's
// harness and its packages: berth image build --agent NAME), or the base image when it needs
// neither.
//
// Invariants:
// - An agent with a harness or packages is accepted only when its image exists and holds
//   them (the image's labels); otherwise it is refused with the exact command that builds it:
//   HARNESS_NOT_IN_IMAGE for an agent without packages, AGENT_IMAGE_MISSING for one with.
// - An image berth chose from a recipe follows the recipe: when a change alters the recipe,
//   the recipe's new image is chosen. An image the agent names stays.
import type Dockerode from 'dockerode';
import { type AgentImageNeeds, agentImageNeeds, BerthError } from '../core/index.js';
import {
  agentImageBuildCommand,
  agentImageRecipe,
  agentImageTag,
  imageContents,
  imageLacks,
} from './agent-image.js';

interface AgentImageFields {
  name: string;
  provider: string;
  image?: string;
  packages?: { apt?: string[]; npm?: string[] };
}

/** (spec, the stored agent it replaces) → the image to store with it (undefined = the host's image). */
export type AgentImageCheck = (
  spec: AgentImageFields,
  stored?: AgentImageFields,
) => Promise<string | undefined>;

export function agentImageCheck(docker: Dockerode, cacheDir: string): AgentImageCheck {
  const recipeImage = async (needs: AgentImageNeeds | null) =>
    needs ? agentImageTag(await agentImageRecipe(cacheDir, needs)) : undefined;
  return async (spec, stored) => {
    const chosenBefore =
      stored?.image !== undefined &&
      spec.image === stored.image &&
      stored.image === (await recipeImage(agentImageNeeds(stored)));
    const named = chosenBefore ? undefined : spec.image;
    const needs = agentImageNeeds(spec);
    if (!needs) return named;
    const image = named ?? (await recipeImage(needs))!;
    const has = await imageContents(docker, image);
    const lacks = imageLacks(has, needs);
    if (lacks.length === 0) return image;
    const build = agentImageBuildCommand(needs);
    const what = has === null ? 'does not exist on this host' : `does not hold ${lacks.join(', ')}`;
    const code = needs.apt.length + needs.npm.length > 0 ? 'AGENT_IMAGE_MISSING' : 'HARNESS_NOT_IN_IMAGE';
    const operation = stored ? 'agent update' : 'agent create';
    throw new BerthError(code, `Image ${image} of agent ${spec.name} ${what} (${operation})`, {
      hint: `Build it: ${build}${named ? ", then leave out the agent's image (berth chooses the one it builds), or name an image that holds them" : ''}`,
    });
  };
}
