// Chooses the model provider from configuration.
import type { KumossConfig } from '../../shared/infra/config';
import { AnthropicModel } from './anthropic';
import { OfflineModel } from './offline';
import type { ModelProvider } from './port';

export function createModel(
  config: KumossConfig['model'],
  env: NodeJS.ProcessEnv = process.env,
): ModelProvider {
  if (config.provider === 'offline') return new OfflineModel();
  const apiKey = env.ANTHROPIC_API_KEY;
  if (!apiKey) throw new Error('model.provider is anthropic but ANTHROPIC_API_KEY is not set');
  return new AnthropicModel({
    apiKey,
    model: config.name,
    smallModel: config.small_name,
    ...(config.base_url ? { baseURL: config.base_url } : {}),
  });
}
